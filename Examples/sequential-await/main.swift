// One task awaits each call before making the next: the calls finish in order, because a
// single caller does all the work. Real screens fire calls from many places at once.
import OrderlyCourse
import OrderlyRepository

print("Sequential await: one Task makes the seven calls one after another.")
let service = NotesScenario(seed: 3, latency: .milliseconds(20) ... .milliseconds(380))
  .makeService()
let log = ActivityLog()

await Task {
  for call in 1...7 { _ = try? await service.perform(call, log: log) }
}.value

for entry in log.entries { print("  \(entry)") }
print("Verdict: \(log.verdict)")
