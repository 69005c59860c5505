import Testing

/// The examples that tell their run on a story clock print the same times on every run, and
/// the times say what their queue changes: these are the rows of the course's pictures.
@Suite("Examples on the story clock")
struct ClockedExamplesTests {
  @Test("bounded-concurrency: at most the limit at once; the next starts as one ends")
  func boundedConcurrency() async throws {
    let output = try await runExample("bounded-concurrency")
    let expected = """
      On the clock: 8 downloads through ConcurrentQueue(limit: 4):
        [ 0 ms] start 1 download
        [ 0 ms] start 2 download
        [ 0 ms] start 3 download
        [ 0 ms] start 4 download
        [ 0 ms] waiting 5 download
        [ 0 ms] waiting 6 download
        [ 0 ms] waiting 7 download
        [ 0 ms] waiting 8 download
        [25 ms] finish 2 download: 25 ms
        [25 ms] start 5 download
        [30 ms] finish 4 download: 30 ms
        [30 ms] start 6 download
        [40 ms] finish 1 download: 40 ms
        [40 ms] start 7 download
        [45 ms] finish 5 download: 20 ms
        [45 ms] start 8 download
        [50 ms] finish 7 download: 10 ms
        [55 ms] finish 3 download: 55 ms
        [65 ms] finish 6 download: 35 ms
        [90 ms] finish 8 download: 45 ms
        (at most 4 running at once: a waiting download starts the moment one ends)
      """
    #expect(output.contains(expected + "\n"))
  }

  @Test("barrier: the refresh runs alone, between the reads")
  func barrier() async throws {
    let output = try await runExample("barrier")
    let expected = """
      On the clock: reads 1-3, the refresh (4), reads 5-7, on ConcurrentQueue(limit: 3):
        [  0 ms] start 1 read
        [  0 ms] start 2 read
        [  0 ms] start 3 read
        [  0 ms] waiting 4 refresh
        [  0 ms] waiting 5 read
        [  0 ms] waiting 6 read
        [  0 ms] waiting 7 read
        [ 30 ms] finish 1 read: 30 ms
        [ 40 ms] finish 3 read: 40 ms
        [ 50 ms] finish 2 read: 50 ms
        [ 50 ms] start 4 refresh
        [ 75 ms] finish 4 refresh: 25 ms, alone
        [ 75 ms] start 5 read
        [ 75 ms] start 6 read
        [ 75 ms] start 7 read
        [ 95 ms] finish 6 read: 20 ms
        [110 ms] finish 5 read: 35 ms
        [120 ms] finish 7 read: 45 ms
        (the refresh starts when the last read before it ends, and the reads after it wait)
      """
    #expect(output.contains(expected + "\n"))
  }

  @Test("keyed-serial-queue: one line per document, the lines side by side")
  func keyedSerialQueue() async throws {
    let output = try await runExample("keyed-serial-queue")
    let expected = """
      On the clock: three saves of each document, one line per document:
        [ 0 ms] start 1 notes.md v1
        [ 0 ms] start 4 todo.txt v1
        [ 0 ms] start 7 plan.key v1
        [ 0 ms] waiting 2 notes.md v2
        [ 0 ms] waiting 3 notes.md v3
        [ 0 ms] waiting 5 todo.txt v2
        [ 0 ms] waiting 6 todo.txt v3
        [ 0 ms] waiting 8 plan.key v2
        [ 0 ms] waiting 9 plan.key v3
        [15 ms] finish 7 plan.key v1: saved
        [15 ms] start 8 plan.key v2
        [20 ms] finish 1 notes.md v1: saved
        [20 ms] start 2 notes.md v2
        [35 ms] finish 4 todo.txt v1: saved
        [35 ms] start 5 todo.txt v2
        [45 ms] finish 5 todo.txt v2: saved
        [45 ms] start 6 todo.txt v3
        [50 ms] finish 2 notes.md v2: saved
        [50 ms] start 3 notes.md v3
        [60 ms] finish 8 plan.key v2: saved
        [60 ms] start 9 plan.key v3
        [75 ms] finish 3 notes.md v3: saved
        [80 ms] finish 9 plan.key v3: saved
        [85 ms] finish 6 todo.txt v3: saved
        (each document's versions one after another; the three documents side by side)
      """
    #expect(output.contains(expected + "\n"))
  }

  @Test("coalescing-queue: only the newest query waits its turn and runs")
  func coalescingQueue() async throws {
    let output = try await runExample("coalescing-queue")
    let expected = """
      On the clock: a key every 40 ms; the first search takes 200 ms, a later one 60 ms:
        [  0 ms] start 1 search "s"
        [ 40 ms] waiting 2 search "sw"
        [ 80 ms] dropped 2 search "sw": replaced by "swi"
        [ 80 ms] waiting 3 search "swi"
        [120 ms] dropped 3 search "swi": replaced by "swif"
        [120 ms] waiting 4 search "swif"
        [160 ms] dropped 4 search "swif": replaced by "swift"
        [160 ms] waiting 5 search "swift"
        [200 ms] finish 1 search "s": answered
        [200 ms] start 5 search "swift"
        [260 ms] finish 5 search "swift": answered
        (the search in flight runs to its end; of the queries typed meanwhile, the newest runs)
      """
    #expect(output.contains(expected + "\n"))
  }

  @Test("notes-repository: straight at the service, each call ends after its own latency")
  func notesRepository() async throws {
    let output = try await runExample("notes-repository")
    let expected = """
      Straight at the service: seven Task {} calls, each logged around the call.
        [  0 ms] start 1 fetchNotes
        [  0 ms] start 2 fetchNote
        [  0 ms] start 3 createNote
        [  0 ms] start 4 fetchNotes
        [  0 ms] start 5 updateNote
        [  0 ms] start 6 fetchNotes
        [  0 ms] start 7 deleteNote
        [ 20 ms] finish 1 fetchNotes: 2 notes
        [ 80 ms] finish 3 createNote: note 3: todo
        [140 ms] finish 7 deleteNote: deleted note 2
        [200 ms] finish 4 fetchNotes: 2 notes
        [260 ms] error 5 updateNote: injected failure: call 1 of updateNote
        [320 ms] finish 2 fetchNote: note 1: groceries
        [380 ms] finish 6 fetchNotes: 2 notes
      """
    #expect(output.contains(expected + "\n"))
  }

  @Test("task-store-policies: each cancelled save rolls back for 10 ms before it ends")
  func taskStorePolicies() async throws {
    let output = try await runExample("task-store-policies")
    let expected = """
        the store's events, and when each cancelled save began to roll back:
          [  0 ms] started save #1
          [ 10 ms] started save #2
          [ 10 ms] rolling back save #1: cancelled by tap 2
          [ 20 ms] ended save #1: cancelled
          [ 20 ms] started save #3
          [ 20 ms] rolling back save #2: cancelled by tap 3
          [ 30 ms] ended save #2: cancelled
          [ 50 ms] ended save #3: succeeded
      """
    #expect(output.contains(expected + "\n"))
  }
}
