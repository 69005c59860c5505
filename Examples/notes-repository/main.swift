// The notes screen's seven calls, each fired as its own Task {} against a slow in-memory notes
// service: first straight at the service, where they finish whenever their latency says; then
// through NotesRepository, whose SerialQueue makes them start and finish in the order made.
// The first run is told on a story clock, so its times are the latencies, the same every run.
import OrderlyCourse
import OrderlyRepository

/// The same latencies for both runs, by call number, 60 ms apart; call 5 (the update) fails.
let scenario = NotesScenario(
  seed: 3,
  latency: .milliseconds(20) ... .milliseconds(380),
  failingCall: 5
)

/// Makes one call through the repository; the repository logs it.
///
/// It stays on the caller's actor until the call has its place in line, so calls made from
/// tasks on the main actor are numbered in the order those tasks run.
func call(
  _ operation: NotesOperation,
  on repository: NotesRepository,
  isolation: isolated (any Actor)? = #isolation
) async {
  switch operation {
  case .fetchNotes: _ = try? await repository.notes()
  case .fetchNote: _ = try? await repository.note(id: 1)
  case .createNote: _ = try? await repository.create(title: "todo")
  case .updateNote: _ = try? await repository.update(id: 1, title: "shopping")
  case .deleteNote: _ = try? await repository.delete(id: 2)
  }
}

func show(_ log: ActivityLog) async {
  for entry in log.entries {
    // `[120 ms] finish 2 fetchNote: ...` when the log kept time.
    let time = entry.elapsed.map { elapsed -> String in
      let (seconds, attoseconds) = elapsed.components
      let milliseconds = "\(seconds * 1_000 + attoseconds / 1_000_000_000_000_000)"
      let padding = String(repeating: " ", count: max(0, 3 - milliseconds.count))
      return "[\(padding)\(milliseconds) ms] "
    }
    print("  \(time ?? "")\(entry)")
  }
  print("Verdict: \(log.verdict)")
  let consequences = await scenario.consequences(of: log.entries)
  print("What went wrong because of the order:" + (consequences.isEmpty ? " nothing" : ""))
  for sentence in consequences { print("  \(sentence)") }
}

print("Straight at the service: seven Task {} calls, each logged around the call.")
// The same service on a story clock: each call takes its latency of the story's time, and the
// story moves the clock to the next call's end once every call still running waits on it.
let story = StoryClock()
let clocked = NotesScenario(
  seed: scenario.seed,
  latency: scenario.latency,
  failingCall: scenario.failingCall,
  clock: story
)
let direct = clocked.makeService()
let directLog = ActivityLog(clock: story)
let (ends, ended) = AsyncStream.makeStream(of: Void.self)
var tasks: [Task<Void, Never>] = []
for number in 1...7 {
  tasks.append(
    Task {
      _ = try? await direct.perform(number, log: directLog)
      ended.yield()
    }
  )
}
/// Moves the story clock call by call: to the next end, once every call still running waits.
func tell(_ story: StoryClock, ends: AsyncStream<Void>) async throws {
  var endings = ends.makeAsyncIterator()
  for running in (1...7).reversed() {
    try await story.advance(whenSleeping: running)
    // The call that ended has written its line before the clock moves on.
    _ = await endings.next()
  }
}
try await tell(story, ends: ends)
for task in tasks { await task.value }
await show(directLog)

print("")
print("Through NotesRepository: the same seven Task {} calls.")
let repository = NotesRepository(service: scenario.makeService())
tasks = []
for operation in NotesScenario<ContinuousClock>.calls {
  tasks.append(Task { await call(operation, on: repository) })
}
for task in tasks { await task.value }
await show(repository.log)
