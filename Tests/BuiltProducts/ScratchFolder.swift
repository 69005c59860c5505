public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh folder for one test's files, removed (with whatever is in it) when released.
public final class ScratchFolder {
  /// The folder.
  public let url: URL

  /// Creates an empty folder under the temporary directory.
  ///
  /// - Throws: If the folder cannot be created.
  public init() throws {
    url = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-test-files-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  /// The path of `name` in the folder.
  ///
  /// - Parameter name: A file name (or a relative path).
  /// - Returns: The full path.
  public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

  /// Every file in the folder with its contents, to check that nothing changed.
  ///
  /// - Returns: Each file's name and bytes.
  /// - Throws: If the folder cannot be listed.
  public func snapshot() throws -> [String: Data] {
    var result: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: url.path) {
      result[name] = FileManager.default.contents(atPath: path(name)) ?? Data()
    }
    return result
  }

  deinit {
    chmod(url.path, 0o755)
    try? FileManager.default.removeItem(at: url)
  }
}
