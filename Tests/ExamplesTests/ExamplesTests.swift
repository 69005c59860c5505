import Testing

@Suite("Examples", .serialized)
struct ExamplesTests {
  @Test("sequential-await: one task, seven calls, in order")
  func sequentialAwait() throws {
    let output = try runExample("sequential-await")
    #expect(timeline(of: output) == sequentialTimeline)
    #expect(output.contains("Verdict: in order"))
  }

  @Test("unordered-tasks: every call starts and ends once, each start before its end")
  func unorderedTasks() throws {
    let output = try runExample("unordered-tasks")
    try checkEveryTaskRunsOnce(output)
    #expect(output.contains("Verdict: "))
  }

  @Test("actor-reentrancy: every call runs once, and the actor lets several in at once")
  func actorReentrancy() throws {
    let output = try runExample("actor-reentrancy")
    try checkEveryTaskRunsOnce(output)
    #expect(output.contains("Calls inside the actor at once, at most: "))
    #expect(!output.contains("at most: 1\n"), "calls overlapped inside the actor")
  }

  @Test("naive-serial-queue: the three versions and what each lacks")
  func naiveSerialQueue() throws {
    let output = try runExample("naive-serial-queue")
    #expect(tasks("error", in: output) == [5])
    #expect(output.contains("yet its caller saw it finish"))
    #expect(output.contains("cancelled caller got: Optional(\"ran anyway\")"))
    #expect(output.contains("deadlocked"))
  }

  @Test("serial-queue: seven jobs from synchronous code end in order; typed results and errors")
  func serialQueue() throws {
    let output = try runExample("serial-queue")
    #expect(timeline(of: output) == sequentialTimeline)
    #expect(tasks("error", in: output) == [5])
    #expect(output.contains("Verdict: in order"))
    #expect(output.contains("task 8 returned \"10 notes\""))
    #expect(output.contains("task 5 threw NotesServiceError: the service rejected task 5"))
    #expect(output.contains("the queue went on: idle, 0 pending"))
  }

  @Test("deadlock-detection: the nested wait throws at once and the fix runs in order")
  func deadlockDetection() throws {
    let output = try runExample("deadlock-detection")
    #expect(output.contains("caught QueueError.reentrantWait"))
    #expect(output.contains("reentrant wait on queue 'notes'"))
    #expect(output.contains("still usable afterwards: yes"))
    #expect(output.contains("outer job ran first\n  inner job ran second"))
  }

  @Test("task-chaining: ordered, and its limits shown")
  func taskChaining() throws {
    let output = try runExample("task-chaining")
    #expect(timeline(of: output).prefix(14) == sequentialTimeline[...])
    #expect(output.contains("Verdict: in order"))
    #expect(output.contains("task 9 threw, nobody heard, task 10 ran (1 entry)"))
  }

  private func checkEveryTaskRunsOnce(_ output: String) throws {
    let events = timeline(of: output)
    #expect(events.count == 14)
    for task in seven {
      let start = try #require(events.firstIndex(of: "s\(task)"))
      let end = try #require(events.firstIndex(of: "e\(task)"))
      #expect(start < end)
    }
  }
}
