// Each call gets its own Task {}, as a button tap or an onAppear would start it. The tasks
// overlap, so slow early calls finish after quick later ones, and the answers are wrong.
import OrderlyCourse
import OrderlyRepository

print("Unordered tasks: seven separate Task {} calls, fired at once.")
let scenario = NotesScenario(seed: 3, latency: .milliseconds(20) ... .milliseconds(380))
let service = scenario.makeService()
let log = ActivityLog()

var tasks: [Task<Void, Never>] = []
for call in 1...7 {
  tasks.append(Task { _ = try? await service.perform(call, log: log) })
}
for task in tasks { await task.value }

for entry in log.entries { print("  \(entry)") }
print("Verdict: \(log.verdict)")
let consequences = await scenario.consequences(of: log.entries)
print("What went wrong because of the order:" + (consequences.isEmpty ? " nothing" : ""))
for sentence in consequences { print("  \(sentence)") }
