// Making the repository an actor does not help: an actor runs one call at a time only until
// that call awaits. While call 1 waits for the service, the actor lets call 2 in, and so on.
import OrderlyCourse
import OrderlyRepository

actor NotesRepository {
  private let service: ScenarioNotesService
  private let log: ActivityLog
  private(set) var callsInside = 0
  private(set) var mostCallsInside = 0

  init(service: ScenarioNotesService, log: ActivityLog) {
    self.service = service
    self.log = log
  }

  func perform(_ call: Int) async {
    callsInside += 1
    mostCallsInside = max(mostCallsInside, callsInside)
    _ = try? await service.perform(call, log: log)  // suspension point: the next call gets in
    callsInside -= 1
  }
}

print("Actor reentrancy: seven Task {} calls into one actor repository.")
let scenario = NotesScenario(seed: 3, latency: .milliseconds(20) ... .milliseconds(380))
let log = ActivityLog()
let repository = NotesRepository(service: scenario.makeService(), log: log)

var tasks: [Task<Void, Never>] = []
for call in 1...7 {
  tasks.append(Task { await repository.perform(call) })
}
for task in tasks { await task.value }

for entry in log.entries { print("  \(entry)") }
print("Calls inside the actor at once, at most: \(await repository.mostCallsInside)")
print("Verdict: \(log.verdict)")
let consequences = await scenario.consequences(of: log.entries)
print("What went wrong because of the order:" + (consequences.isEmpty ? " nothing" : ""))
for sentence in consequences { print("  \(sentence)") }
