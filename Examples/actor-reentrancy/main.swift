// Making the repository an actor does not help: an actor runs one call at a time only until
// that call awaits. While task 1 waits for the service, the actor lets task 2 in, and so on.
import OrderlyExampleSupport

actor NotesRepository {
  private let service = SlowNotesService()
  private let log: ScenarioLog
  private(set) var callsInside = 0
  private(set) var mostCallsInside = 0

  init(log: ScenarioLog) {
    self.log = log
  }

  func perform(_ task: ScenarioTask) async {
    callsInside += 1
    mostCallsInside = max(mostCallsInside, callsInside)
    await service.run(task, log: log)  // suspension point: the actor takes the next call
    callsInside -= 1
  }
}

print("Actor reentrancy: seven Task {} calls into one actor repository.")
let log = ScenarioLog()
let repository = NotesRepository(log: log)

var tasks: [Task<Void, Never>] = []
for task in ScenarioTask.seven {
  tasks.append(Task { await repository.perform(task) })
}
for task in tasks { await task.value }

print("Calls inside the actor at once, at most: \(await repository.mostCallsInside)")
print("Verdict: \(log.verdict)")
