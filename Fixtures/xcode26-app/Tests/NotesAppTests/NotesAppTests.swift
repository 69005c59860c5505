import OrderlyLaunch
import OrderlyTaskStore
import OrderlyTestSupport
import Testing

@testable import NotesApp

/// A server whose calls for the given texts each wait at their own gate; others answer at once.
func heldServer(_ held: [String]) -> (NotesServer, [String: Gate]) {
  let gates = Dictionary(uniqueKeysWithValues: held.map { ($0, Gate()) })
  let server = NotesServer { text in try? await gates[text]?.wait() }
  return (server, gates)
}

// Main-actor by the target's default isolation, as the tests of an Xcode 26 app are.
@Suite(
  "An Xcode 26 style app target: each app module from main-actor code",
  .timeLimit(.minutes(1))
)
struct NotesAppTests {
  @Test("taps save in tap order, though the server is let answer the last first")
  func savesInTapOrder() async throws {
    let (server, gates) = heldServer(["a", "b", "c"])
    let model = NotesModel(server: server)
    model.save("a")
    model.save("b")
    model.save("c")
    for text in ["c", "b", "a"] { gates[text]?.open() }
    let all = try await model.reload()
    #expect(all == ["a", "b", "c"])
    #expect(model.saved == ["a", "b", "c"])
  }

  @Test("TaskStore: cancelPrevious, enqueue, dropNew, keepLatest, joinExisting, concurrent")
  func everyPolicy() async throws {
    let (server, gates) = heldServer(["s", "", "first", "one", "two"])
    let model = SearchModel(server: server)
    await server.store("swift")

    // cancelPrevious: the second query cancels the first, and its results are shown.
    let first = model.queryChanged("s")
    let second = model.queryChanged("sw")
    try await second.value
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(model.results == ["swift"])

    // enqueue: saves one after another, in order.
    model.save("x")
    try await model.save("y").value
    // dropNew: a second refresh while one runs is dropped.
    let refresh = model.refresh("1")
    let dropped = await model.refresh("2").outcome
    #expect(dropped.kind == .dropped)
    gates[""]?.open()
    try await refresh.value
    // keepLatest: of the previews waiting, only the newest runs.
    let running = model.preview("first")
    let replaced = model.preview("second")
    let latest = model.preview("third")
    gates["first"]?.open()
    try await running.value
    try await latest.value
    #expect(await replaced.outcome.kind == .dropped)
    // joinExisting: a second load shares the running one.
    #expect(model.load() == model.load())
    // concurrent(limit: 2): two uploads run, the third waits its turn.
    let uploads = ["one", "two", "three"].map { model.upload($0) }
    #expect(model.runningCount(.upload) == 2)
    #expect(model.queuedCount(.upload) == 1)
    gates["one"]?.open()
    gates["two"]?.open()
    for upload in uploads { try await upload.value }
    #expect(
      model.log == [
        "saved x", "saved y", "refreshed 1", "previewed first", "previewed third",
        "uploaded one", "uploaded two", "uploaded three",
      ]
    )
  }

  @Test("LaunchSequencer: a step bridged from a callback, then the next; never two on screen")
  func launchSteps() async throws {
    let flow = LaunchFlow()
    let prompt = PasscodePrompt()
    let whatsNew = LaunchSignal<Void>()
    flow.sequencer.enqueue(PasscodeStep(prompt: prompt, onScreen: flow.show))
    let last = Task {
      await flow.sequencer.enqueueAndWait(WhatsNewStep(done: whatsNew, onScreen: flow.show))
    }
    while !prompt.isPresented { await Task.yield() }
    #expect(flow.screen == ["passcode up"])
    prompt.unlock()  // the user types the passcode: the prompt's callback fires
    while flow.screen.count < 3 { await Task.yield() }
    whatsNew.fire()
    let record = await last.value
    #expect(record?.outcome == .completed)
    #expect(flow.screen == ["passcode up", "passcode down", "what's new up", "what's new down"])
    #expect(flow.sequencer.history.map(\.name) == ["PasscodeStep", "WhatsNewStep"])
  }
}
