// One task awaits each call before making the next: the calls finish in order, because a
// single caller does all the work. Real screens fire calls from many places at once.
import OrderlyExampleSupport

print("Sequential await: one Task runs the seven calls one after another.")
let log = ScenarioLog()
let service = SlowNotesService()

await Task {
  for task in ScenarioTask.seven {
    await service.run(task, log: log)
  }
}.value

print("Verdict: \(log.verdict)")
