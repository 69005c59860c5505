import Foundation
import Testing

/// OrderlyCore's platform code stays in its room (`Modules/OrderlyCore/Platform`): no other
/// source of the module asks which system it is built for.
@Suite("The platform room")
struct PlatformRoomTests {
  /// The module's source folder, from this file's path.
  private static let moduleFolder = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Modules/OrderlyCore")

  @Test("no canImport(Darwin) or ORDERLY_PORTABLE_LOCKS outside Modules/OrderlyCore/Platform")
  func noPlatformChecksOutsideTheRoom() throws {
    let files =
      FileManager.default.enumerator(atPath: Self.moduleFolder.path)?
      .compactMap { $0 as? String }
      .filter { $0.hasSuffix(".swift") } ?? []
    #expect(files.count > 20, "the module's sources were not found at \(Self.moduleFolder.path)")
    var offenders: [String] = []
    for file in files where !file.hasPrefix("Platform/") {
      let text = try String(
        contentsOf: Self.moduleFolder.appendingPathComponent(file),
        encoding: .utf8
      )
      for marker in ["canImport(Darwin)", "canImport(Glibc)", "ORDERLY_PORTABLE_LOCKS"]
      where text.contains(marker) {
        offenders.append("\(file): \(marker)")
      }
    }
    #expect(offenders.isEmpty, "platform checks outside the room: \(offenders)")
  }
}
