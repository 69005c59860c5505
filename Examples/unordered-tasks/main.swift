// Each call gets its own Task {}, as a button tap or an onAppear would start it. The tasks
// overlap, so the slow first call finishes long after the quick later ones.
import OrderlyExampleSupport

print("Unordered tasks: seven separate Task {} calls, fired at once.")
let log = ScenarioLog()
let service = SlowNotesService()

var tasks: [Task<Void, Never>] = []
for task in ScenarioTask.seven {
  tasks.append(Task { await service.run(task, log: log) })
}
for task in tasks { await task.value }

print("Verdict: \(log.verdict)")
