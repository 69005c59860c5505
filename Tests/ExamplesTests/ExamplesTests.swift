import Foundation
import Testing

@Suite("Examples", .serialized)
struct ExamplesTests {
  @Test("readme-sample: the README's code runs and prints its four lines in order")
  func readmeSample() async throws {
    let output = try await runExample("readme-sample")
    #expect(
      output == """
        1. saved the first note
        2. saved the second, after the first ended
        3. counted 2 notes
        4. the cancelled job never ran

        """
    )
  }

  @Test("sequential-await: one task, seven calls, in order")
  func sequentialAwait() async throws {
    let output = try await runExample("sequential-await")
    #expect(timeline(of: output) == sequentialTimeline)
    #expect(output.contains("Verdict: in order"))
  }

  @Test(
    "unordered-tasks and actor-reentrancy: the seeded run ends out of order, with wrong answers",
    arguments: ["unordered-tasks", "actor-reentrancy"]
  )
  func unorderedRuns(example: String) async throws {
    let output = try await runExample(example)
    try checkEveryTaskRunsOnce(output)
    // Latencies 60 ms apart, by call number: every run ends in this order.
    #expect(tasks("finish", in: output) == [1, 3, 7, 4, 5, 2, 6])
    #expect(output.contains("Verdict: out of order: task 3 finished before task 2"))
    #expect(
      output.contains(
        "call 4 fetchNotes saw 2 notes; in order it would have seen 3 notes"
      )
    )
    if example == "actor-reentrancy" {
      #expect(output.contains("Calls inside the actor at once, at most: 7"))
    }
  }

  @Test("naive-serial-queue: the three versions and what each lacks")
  func naiveSerialQueue() async throws {
    let output = try await runExample("naive-serial-queue")
    #expect(tasks("error", in: output) == [5])
    #expect(
      output.contains("  [ 880 ms] error 5 updateNote: injected failure: call 1 of updateNote")
    )
    #expect(output.contains("yet its caller saw its enqueue return like every other"))
    // Version 1 on the story clock: one call at a time, each from the end of the one before.
    #expect(output.contains("  [   0 ms] start 1 fetchNotes\n  [  20 ms] finish 1 fetchNotes"))
    #expect(output.contains("  [1400 ms] finish 7 deleteNote: deleted note 2\nVerdict: in order"))
    #expect(output.contains("call 5 threw: injected failure: call 1 of updateNote"))
    #expect(output.contains("cancelled caller got: Optional(\"ran anyway\")"))
    #expect(output.contains("deadlocked"))
  }

  @Test("serial-queue: seven jobs from synchronous code end in order; typed results and errors")
  func serialQueue() async throws {
    let output = try await runExample("serial-queue")
    #expect(timeline(of: output) == sequentialTimeline)
    #expect(tasks("error", in: output) == [5])
    #expect(output.contains("Verdict: in order"))
    #expect(output.contains("call 4's job returned \"3 notes\""))
    #expect(output.contains("call 5's job threw InjectedFailure: injected failure: call 1 of"))
    #expect(output.contains("enqueueAndWait returned an Int: 2"))
    #expect(output.contains("the queue went on: idle, 0 pending"))
  }

  @Test("deadlock-detection: the nested wait throws at once and the fix runs in order")
  func deadlockDetection() async throws {
    let output = try await runExample("deadlock-detection")
    #expect(output.contains("caught QueueError.reentrantWait"))
    #expect(output.contains("reentrant wait on queue 'notes'"))
    #expect(output.contains("still usable afterwards: yes"))
    #expect(output.contains("outer job ran first\n  inner job ran second"))
  }

  @Test("fire-and-forget: execute keeps the order, sees isCurrent, and cancelAll drops it unrun")
  func fireAndForget() async throws {
    let output = try await runExample("fire-and-forget")
    let expected = """
      Callbacks hand lines to the log with execute: no handle, no result, in order.
        log: saved note 1
        log: saved note 2
        log: saved note 3
        log: a detached job keeps its place among them
        log: inside the closure, isCurrent is true
      Behind a busy job, 3 lines wait; cancelAll() drops them unrun:
        start 1 busy job
        waiting 2 saved note 4
        waiting 3 saved note 5
        waiting 4 saved note 6
        dropped 2 saved note 4: cancelAll() took it out, unrun
        dropped 3 saved note 5: cancelAll() took it out, unrun
        dropped 4 saved note 6: cancelAll() took it out, unrun
        cancelled 1 busy job: cancelAll() ended its wait
        start 5 after cancelAll
        finish 5 after cancelAll: it runs
        (the lines in line never run; the one enqueued after cancelAll() does)

      """
    #expect(output == expected)
  }

  @Test("task-chaining: ordered, and its limits shown")
  func taskChaining() async throws {
    let output = try await runExample("task-chaining")
    #expect(timeline(of: output).prefix(14) == sequentialTimeline[...])
    #expect(output.contains("Verdict: in order"))
    #expect(output.contains("the job after the failing one ran (2 log entries)"))
    // On the story clock: every chained task waits from the start for the one before it.
    #expect(output.contains("  [   0 ms] start 1 fetchNotes\n  [   0 ms] waiting 2 fetchNote\n"))
    #expect(output.contains("  [1260 ms] start 7 deleteNote\n  [1400 ms] finish 7 deleteNote"))
  }

  @Test("fifo-vs-actor-queue: both queues keep the counter in order; starts vs ends differ")
  func fifoVersusActorQueue() async throws {
    let output = try await runExample("fifo-vs-actor-queue")
    #expect(output.contains("ActorQueue<Counter>:      100 calls, in order"))
    #expect(output.contains("SerialQueue (FIFO):       100 calls, in order"))
    #expect(output.contains("Task {} to the actor:     100 calls, "))
    #expect(
      output.contains(
        """
        ActorQueue, two jobs (job 1 suspends on a 50 ms call; job 2 never suspends):
          [ 0 ms] start 1 slow
          [ 0 ms] suspended 1 slow: awaiting its 50 ms call, off the actor
          [ 0 ms] start 2 quick
          [ 0 ms] finish 2 quick
          [50 ms] resumed 1 slow
          [50 ms] finish 1 slow
        """
      )
    )
    #expect(
      output.contains(
        """
        SerialQueue, the same two jobs:
          [ 0 ms] start 1 slow
          [ 0 ms] waiting 2 quick
          [50 ms] finish 1 slow
          [50 ms] start 2 quick
          [50 ms] finish 2 quick
        """
      )
    )
  }

  @Test("main-actor-queue: messages shown in arrival order; a job may wait on its own queue")
  func mainActorQueue() async throws {
    let output = try await runExample("main-actor-queue")
    #expect(
      output.contains(
        "MainActorQueue shows:           1 2 3 4 5 6 7 8 9 10 11 12 ...\n    in order"
      )
    )
    #expect(
      output.contains(
        "job 1 starts\n  job 2 runs\n  job 1 waits on its own queue: no deadlock\n  job 1 ends"
      )
    )
  }

  @Test("bounded-concurrency: at most 4 at once both ways; the queue starts in order")
  func boundedConcurrency() async throws {
    let output = try await runExample("bounded-concurrency")
    // The group's peak depends on timing; the cap must hold.
    let group = try #require(output.components(separatedBy: "Task group").last)
    let peaks = ["1", "2", "3", "4"].map { "downloaded 78 KiB; at most \($0) at once" }
    #expect(peaks.contains { group.contains($0) })
    #expect(
      output.contains(
        "ConcurrentQueue(limit: 4):\n  downloaded 78 KiB; at most 4 at once\n  admission order: in order"
      )
    )
    #expect(output.contains("results, in enqueue order: 1K 2K 3K 4K 5K 6K 7K 8K 9K 10K 11K 12K"))
    #expect(output.contains("serial: limit 1"))
  }

  @Test("keyed-serial-queue: every document ends at its latest version; lines are freed")
  func keyedSerialQueue() async throws {
    let output = try await runExample("keyed-serial-queue")
    let queued = try #require(output.components(separatedBy: "KeyedSerialQueue<String>").last)
    for document in ["notes.md", "todo.txt", "plan.key"] {
      #expect(queued.contains("\(document): saved version 3\n"))
    }
    #expect(!queued.contains("stale"))
    #expect(queued.contains("lines in use afterwards: 0"))
  }

  @Test("barrier: reads before see version 1, after see version 2; the refresh ran alone")
  func barrier() async throws {
    let output = try await runExample("barrier")
    for read in 1...3 { #expect(output.contains("read \(read): version 1, pear 1.2")) }
    for read in 4...6 { #expect(output.contains("read \(read): version 2, pear 2.4")) }
    #expect(output.contains("Reads inside at once, at most: 3"))
    #expect(output.contains("Reads the refresh found inside: 0"))
  }

  @Test("cancellation: every case resumes its awaiter with what the contract says")
  func cancellation() async throws {
    let output = try await runExample("cancellation")
    let expected = [
      "its awaiter threw CancellationError at once, while the queue is still busy",
      "its awaiter returned stopped early: Task.isCancelled was true",
      "running job's awaiter threw CancellationError",
      "the queue stays usable: returned next job ran",
      "the caller threw CancellationError; the job never ran",
      "the caller threw CancellationError",
      "the waiter threw CancellationError; the jobs go on",
      "the barrier's awaiter threw CancellationError",
      "did not wait for the reader: returned the job behind it ran",
      "it threw CancellationError and took no permit: 0 waiting",
      "a later signal is kept for the next waiter: 1 available",
      "the next job started anyway: returned 0",
    ]
    for line in expected { #expect(output.contains(line), "missing: \(line)") }
    #expect(
      output.components(separatedBy: "pending job's awaiter threw CancellationError").count == 3
    )
  }

  @Test("notes-repository: straight at the service out of order; through the repository in order")
  func notesRepository() async throws {
    let output = try await runExample("notes-repository")
    let parts = output.components(separatedBy: "Through NotesRepository")
    #expect(parts.count == 2)
    #expect(parts[0].contains("Verdict: out of order: task "))
    let repositoryLog = parts[1].split(separator: "\n").filter {
      $0.hasPrefix("  start") || $0.hasPrefix("  finish") || $0.hasPrefix("  error")
    }
    let calls = repositoryLog.map { Int($0.split(separator: " ")[1]) ?? 0 }
    #expect(calls == (1...7).flatMap { [$0, $0] })
    #expect(parts[1].contains("error 5 updateNote: injected failure: call 1 of updateNote"))
    #expect(parts[1].contains("Verdict: in order"))
  }

  @Test("outbox-operator: the stuck key found with orderly outbox, retried, delivered in order")
  func outboxOperator() async throws {
    let output = try await runExample("outbox-operator")
    #expect(output.contains("Blocked keys:    1 (note-7)"))
    #expect(output.contains("note-7  2        1"))
    #expect(output.contains("waits at a dead letter (retry or drop it)"))
    #expect(output.contains("server said 422: title longer than 40 characters"))
    #expect(output.contains("\"text\" : \"title: Groceries for the long weekend at the lake\""))
    #expect(output.contains("not a dead letter: only a dead letter can be retried"))
    #expect(output.contains("(exit status 1)"))
    #expect(
      output.contains(
        """
        The app, still running, delivered note 7 in order:
          note 7: title: Groceries for the long weekend at the lake
          note 7: text: milk, eggs
          note 7: text: milk, eggs, bread
        """
      )
    )
    #expect(output.contains("Retrying keys:   0\nScheduled keys:  0\nOldest pending:  none\n\n"))
    // The picture's lines: the dead letter's attempt, the operator's retry, then the two
    // behind it, in order.
    #expect(
      output.hasSuffix(
        """
          start 1 note 7 title (#1)
          error 1 note 7 title (#1): failed, refused (422), now a dead letter
          start 4 note 7 title (#1), the operator's retry
          finish 4 note 7 title (#1), the operator's retry: delivered
          start 2 note 7 text (#3)
          finish 2 note 7 text (#3): delivered
          start 3 note 7 text (#5)
          finish 3 note 7 text (#5): delivered
          (the dead letter held note 7's line; retried, it and the two behind it went in order)

        """
      )
    )
  }

  @Test(
    "outbox-fair-shares: without groups the small tenant waits; with groups it gets its weight's part, in order"
  )
  func outboxFairShares() async throws {
    let output = try await runExample("outbox-fair-shares")
    let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(
      lines.first
        == "appended 3 changes to each of 100 keys of big: (300), then 60 to each of 2 keys of small: (120)"
    )
    #expect(lines.contains("  without groups:          big: 60, small: 0"), "\(output)")
    /// The small tenant's part of the first 60 on a line, which is within a turn (16) of what
    /// its weight gives it.
    func small(_ prefix: String) -> Int? {
      guard let line = lines.first(where: { $0.hasPrefix(prefix) }),
        let count = line.split(separator: " ").last
      else { return nil }
      return Int(count)
    }
    let even = small("  big: 1, small: 1:")
    let weighted = small("  big: 1, small: 3:")
    #expect(even.map { (30 - 16...30 + 16).contains($0) } == true, "\(output)")
    #expect(weighted.map { (45 - 16...45 + 15).contains($0) } == true, "\(output)")
    #expect(output.contains("every record's changes in order, in each run: yes"))
    #expect(output.contains("big:          1       25.0 %  100   300      0     0"), "\(output)")
    #expect(output.contains("small:        3       75.0 %  2     120      0     0"))
    #expect(output.contains("(other keys)  1       -       0     0        0     0      -"))
  }

  @Test(
    "outbox-rate-limits: a tenant's keys begin 2 deliveries a window, one each, in order; the waiting keys are listed"
  )
  func outboxRateLimits() async throws {
    let output = try await runExample("outbox-rate-limits")
    #expect(
      output.hasPrefix(
        """
        appended 3 changes to each of acme:invoices and acme:orders, 2 to solo
        window 1: 2 of the tenant's calls (limit 2); solo #1, solo #2 at once, no limit counts it

        $ orderly outbox keys --stuck --database outbox.sqlite

        """
      )
    )
    #expect(output.contains("acme:invoices  2        0"))
    #expect(output.contains("rate limited until "))
    #expect(
      output.hasSuffix(
        """
        window 2: 2 of the tenant's calls (limit 2)
        window 3: 2 of the tenant's calls (limit 2)
        acme:invoices: acme:invoices #1, acme:invoices #2, acme:invoices #3
        acme:orders: acme:orders #1, acme:orders #2, acme:orders #3
        solo: solo #1, solo #2

        """
      )
    )
  }

  @Test(
    "outbox-schedules: each tick appended once by two racing outboxes, in order; paused ticks not appended; the listing"
  )
  func outboxSchedules() async throws {
    let output = try await runExample("outbox-schedules")
    #expect(
      output.hasPrefix(
        """
        set hourly-sync: every hour on key sync, first tick at +1 h
          delivered sync: pull changes (tick +1 h)
          delivered sync: pull changes (tick +2 h)
          delivered sync: pull changes (tick +3 h)
        3 ticks, 3 appended: the two outboxes raced for each, and each was taken once

        paused hourly-sync; two hours pass
        resumed: ticks +4 h and +5 h passed while paused and are not appended
          delivered sync: pull changes (tick +6 h)

        """
      )
    )
    #expect(output.contains(#""timing" : "every 1 hour""#))
    #expect(output.contains(#""timing" : "cron 0 2 * * * (Europe/Paris)""#))
    #expect(output.contains(#""missedTicks" : "catch-up-once""#))
    #expect(output.contains(#""lastTick" : null"#))
  }

  @Test(
    "outbox-poison-key: a retried request appends one charge; a failing key is quarantined while others go on, then resumed in order"
  )
  func outboxPoisonKey() async throws {
    let output = try await runExample("outbox-poison-key")
    #expect(
      output.hasPrefix(
        """
        checkout of order 1: appended
        the same request again: a duplicate of the first append; nothing stored
        pending: 6 charges for 3 customers

        event: quarantined carol: its first message failed 3 time(s) in a row; last error: \
        503: carol's account is closed for maintenance
        The payment service charged, while carol's key was set aside:
          alice: order 1, 1250 cents
          alice: order 5, 2500 cents
          bob: order 3, 990 cents
          bob: order 6, 75 cents

        """
      )
    )
    #expect(output.contains("carol  2        0"))
    #expect(output.contains("quarantined (resume it once fixed): its first message failed 3"))
    #expect(
      output.hasSuffix(
        """
        Carol's charges, delivered in order once resumed:
          carol: order 2, 4000 cents
          carol: order 4, 150 cents

        $ orderly outbox keys --database outbox.sqlite
        No keys: nothing pending, no dead letters, no pauses.


        """
      )
    )
  }

  @Test("outbox-basics: retried with backoff, a dead letter stops the line, then the rest in order")
  func outboxBasics() async throws {
    let output = try await runExample("outbox-basics")
    #expect(
      output.contains(
        """
          [  0 ms] delivering #1
          [ 20 ms] retrying #1 in 0.1 seconds: the server is unreachable
          [120 ms] delivering #1 (attempt 2)
          [140 ms] retrying #1 in 0.2 seconds: the server is unreachable
          [340 ms] delivering #1 (attempt 3)
          [360 ms] delivered #1
          [360 ms] delivering #2
          [380 ms] delivered #2
          [380 ms] delivering #3
          [400 ms] dead letter #3: 404: the server has no note 7 (line stopped)
          Pending: 2, dead letters: 1.
        """
      )
    )
    // On the injected clock: each attempt takes the server's 20 ms, the waits 100 then 200 ms.
    #expect(
      output.contains(
        "[400 ms] delivering #4\n  [420 ms] delivered #4\n"
          + "  [420 ms] delivering #5\n  [440 ms] delivered #5\n"
      )
    )
    #expect(output.hasSuffix("The server's notes:\n  note 2: ideas (empty)\n"))
  }

  @Test("notes-sqlite: calls in order, notes persist across reopening, a bad file is refused")
  func notesSQLite() async throws {
    let output = try await runExample("notes-sqlite")
    #expect(output.contains("error 6 updateNote: no note with id 2\nVerdict: in order"))
    #expect(
      output.contains(
        "  note 1: groceries (milk, eggs, bread)\n  note 3: call the plumber\n"
      )
    )
    #expect(
      output.contains("shopping.txt is not an Orderly notes database: it is not an SQLite file")
    )
    #expect(output.contains("its contents afterwards: milk"))
  }

  @Test("launch-sequence: no duplicates, a skipped, a timed-out and a cancelled step")
  func launchSequence() async throws {
    let output = try await runExample("launch-sequence")
    #expect(
      output.components(separatedBy: "already pending or running, not queued").count == 6
    )
    let history = try #require(
      output.components(
        separatedBy: "History, one step at a time, in order, with the clock's time:\n"
      ).last
    )
    // On the injected clock: 30 ms per modal read, the 120 ms timeout, a logout 10 ms in; each
    // launch's later steps wait in line from the moment it added them.
    #expect(
      history == """
          [  0 ms] start 1 AppUpgradeNudgeStep
          [  0 ms] waiting 2 PasscodeStep
          [  0 ms] waiting 3 RemoveLaunchScreenStep
          [  0 ms] waiting 4 DeepLinkStep
          [  0 ms] waiting 5 WhatsNewStep
          [ 30 ms] finish 1 AppUpgradeNudgeStep: completed
          [ 30 ms] start 2 PasscodeStep
          [ 60 ms] finish 2 PasscodeStep: completed
          [ 60 ms] start 3 RemoveLaunchScreenStep
          [ 60 ms] finish 3 RemoveLaunchScreenStep: completed
          [ 60 ms] start 4 DeepLinkStep
          [ 60 ms] dropped 4 DeepLinkStep: skipped (shouldRun() said no)
          [ 60 ms] start 5 WhatsNewStep
          [180 ms] error 5 WhatsNewStep: timed out
          [180 ms] start 6 AppUpgradeNudgeStep
          [180 ms] waiting 7 PasscodeStep
          [210 ms] finish 6 AppUpgradeNudgeStep: completed
          [210 ms] start 7 PasscodeStep
          [220 ms] cancelled 7 PasscodeStep: cancelled

        """
    )
    // One modal at a time: not idle while the cancelled prompt is still up; idle once it left.
    #expect(output.contains("cancelAll(): idle while the prompt is still up: false"))
    #expect(output.contains("once its run() returned: idle true, prompt up false"))
    #expect(output.contains("[modal] passcode prompt dismissed (cancelled)"))
    #expect(!output.contains("opening notes://"))
  }

  @Test("launch-step-signal: unlocked by the callback, dismissed when cancelled, edge cases")
  func launchStepSignal() async throws {
    let output = try await runExample("launch-step-signal")
    #expect(output.contains("    unlocked\n   PasscodeStep: completed"))
    #expect(output.contains("passcode prompt dismissed\n   PasscodeStep: cancelled"))
    #expect(output.contains("wait() after fire: fired before anyone waited"))
    #expect(output.contains("a second fire is ignored: fire returned false"))
    #expect(output.contains("a cancelled waiter: threw CancellationError"))
  }

  @Test("task-store-policies: each policy treats the same three taps as documented")
  func taskStorePolicies() async throws {
    let output = try await runExample("task-store-policies")
    func outcomes(_ policy: String) -> [String] {
      guard let section = output.components(separatedBy: "\n.\(policy)\n").last else { return [] }
      return section.split(separator: "\n").prefix(3).map {
        String($0.split(separator: "│").last ?? "").trimmingCharacters(in: .whitespaces)
      }
    }
    #expect(outcomes("cancelPrevious") == ["cancelled", "cancelled", "saved"])
    #expect(outcomes("cancelPreviousAndWait") == ["cancelled", "cancelled", "saved"])
    #expect(outcomes("enqueue") == ["saved", "saved", "saved"])
    #expect(outcomes("concurrent(limit: 2)") == ["saved", "saved", "saved"])
    #expect(outcomes("dropNew") == ["saved", "dropped", "dropped"])
    #expect(
      outcomes("keepLatest") == ["saved", "dropped: a newer tap took its place in line", "saved"]
    )
    // keepLatest's tap 2 waits in line (10 ms) until tap 3 replaces it; dropNew's never waits.
    #expect(
      output.contains(".keepLatest\n  tap 1 │██████✓                 │ saved\n  tap 2 │  ··-")
    )
    #expect(output.contains(".dropNew\n  tap 1 │██████✓                 │ saved\n  tap 2 │  -  "))
    #expect(
      outcomes("joinExisting") == [
        "saved", "joined tap 1: got its result", "joined tap 1: got its result",
      ]
    )
    // Overlap: cancelPrevious starts tap 2 while tap 1 rolls back; cancelPreviousAndWait waits.
    // A save is 6 columns (30 ms), a rollback 2 (10 ms).
    #expect(output.contains(".cancelPrevious\n  tap 1 │██░░✗"))
    #expect(output.contains("  tap 2 │  ██░░✗"))
    #expect(output.contains("  tap 2 │  ··░░✗"))
    #expect(output.contains("  tap 3 │    ██████✓"))
    #expect(output.contains("[ 20 ms] ended save #1: cancelled\n    [ 20 ms] started save #3\n"))
  }

  @Test("coalescing-queue: the running search and the newest query run; the ones between never do")
  func coalescingQueue() async throws {
    let output = try await runExample("coalescing-queue")
    #expect(output.contains("\"s\": 5 results: swift, swiftly, sweet, swim, sword"))
    for query in ["sw", "swi", "swif"] {
      #expect(output.contains("\"\(query)\": replaced by a newer query; never searched"))
    }
    #expect(output.contains("\"swift\": 2 results: swift, swiftly"))
    #expect(output.contains("The server received: \"s\", \"swift\"\n"))
  }

  @Test("dedicated-thread: blocking writes run in order, on one thread that is not the pool's")
  func dedicatedThread() async throws {
    let output = try await runExample("dedicated-thread")
    for record in 1...4 {
      #expect(output.contains("finish \(record) write: it blocked its thread 20 ms"))
    }
    // Writes 2 to 4 wait in line behind write 1 from the start.
    #expect(output.contains("  start 1 write\n  waiting 2 write\n  waiting 3 write\n"))
    #expect(output.contains("in the order enqueued: yes"))
    #expect(output.contains("all on one thread of their own: yes"))
    #expect(output.contains("that thread is one of the cooperative pool's: no"))
  }

  @Test("task-store-context: the waiting save runs with its own caller's request id and priority")
  func taskStoreContext() async throws {
    let output = try await runExample("task-store-context")
    #expect(output.contains("  running: 1, waiting: 1"))
    #expect(output.contains("  save 1 ran for request A at priority TaskPriority.high"))
    #expect(output.contains("  save 2 ran for request B at priority TaskPriority.low"))
  }

  @Test("task-store-model: the buttons follow isRunning; cancel stops the late answer")
  func taskStoreModel() async throws {
    let output = try await runExample("task-store-model")
    #expect(
      output.contains("Tap Do thing:\n  changed                    [Do thing] (disabled)  [Cancel]")
    )
    #expect(
      output.contains("The server answers:\n  changed                    [Do thing]  text: \"!\"")
    )
    #expect(output.contains("Final text: \"!\""))
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
