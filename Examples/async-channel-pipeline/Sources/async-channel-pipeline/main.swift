// The "run serially" answer's serial download manager: an actor owns an AsyncChannel of file names and one loop
// that downloads them one at a time with `for await`. Downloads are fake and local: a "server"
// returns bytes after a delay, and the manager writes them to a temporary folder. Then the same
// pipeline with a SerialQueue, for comparison.
import AsyncAlgorithms
import Foundation
import OrderlyCore

/// A pretend server: file n arrives after a delay that shrinks with n, so a concurrent
/// downloader would finish them in reverse order.
enum FakeServer {
  static func download(_ name: String, index: Int) async throws -> Data {
    try await Task.sleep(for: .milliseconds(40 - index * 3))
    return Data("contents of \(name)\n".utf8)
  }
}

/// Writes each download and remembers the order files were saved in.
actor Downloads {
  let folder: URL
  private(set) var saved: [String] = []

  init(folder: URL) { self.folder = folder }

  func save(_ data: Data, as name: String) throws {
    try data.write(to: folder.appending(component: name))
    saved.append(name)
  }
}

actor SerialDownloadManager {
  private let names = AsyncChannel<(name: String, index: Int)>()
  private let downloads: Downloads

  init(downloads: Downloads) {
    self.downloads = downloads
  }

  /// The consumer: one `for await` loop, so downloads happen one after another.
  func run() async throws {
    for await (name, index) in names {
      let data = try await FakeServer.download(name, index: index)
      try await downloads.save(data, as: name)
    }
  }

  /// The producer side: `send` suspends until the loop has taken the name.
  nonisolated func append(_ name: String, index: Int) async {
    await names.send((name, index))
  }

  nonisolated func finish() {
    names.finish()
  }
}

let folder = FileManager.default.temporaryDirectory
  .appending(component: "orderly-async-channel-\(ProcessInfo.processInfo.processIdentifier)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
let files = (0..<8).map { "\($0).jpg" }

print("8 fake downloads; file 0 is the slowest, file 7 the fastest.")
print("")
print("AsyncChannel + for await (the “run serially” answer):")
let channelDownloads = Downloads(folder: folder.appending(component: "channel"))
try FileManager.default.createDirectory(
  at: channelDownloads.folder,
  withIntermediateDirectories: true
)
let manager = SerialDownloadManager(downloads: channelDownloads)
let consumer = Task { try await manager.run() }
for (index, name) in files.enumerated() {
  await manager.append(name, index: index)  // the caller must be async, and waits its turn
}
manager.finish()
try await consumer.value
print("  saved in order: \(await channelDownloads.saved.joined(separator: " "))")

print("")
print("SerialQueue:")
let queueDownloads = Downloads(folder: folder.appending(component: "queue"))
try FileManager.default.createDirectory(
  at: queueDownloads.folder,
  withIntermediateDirectories: true
)
let queue = SerialQueue(name: "downloads")
var handles: [QueuedTask<Int>] = []
for (index, name) in files.enumerated() {
  // Enqueued from synchronous code; each job has its own typed result and can be cancelled.
  handles.append(
    queue.enqueue {
      let data = try await FakeServer.download(name, index: index)
      try await queueDownloads.save(data, as: name)
      return data.count
    }
  )
}
handles[5].cancel()
var bytes = 0
for handle in handles {
  if case .success(let count) = await handle.result { bytes += count }
}
print("  saved in order: \(await queueDownloads.saved.joined(separator: " "))")
print("  \(bytes) bytes; 5.jpg was cancelled before its turn and never downloaded")
let onDisk = try FileManager.default.contentsOfDirectory(atPath: queueDownloads.folder.path).count
print("  files on disk: \(onDisk)")
