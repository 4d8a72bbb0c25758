// swift-tools-version:6.0
import Foundation
import PackageDescription

// libFuzzer targets for the parsers that face the network (docs/HARDENING.md, "Fuzzing").
//
// A package of its own, so that the main `swift build` never sees it: its one executable has no
// `main` (libFuzzer brings it) and only links with `-sanitize=fuzzer`. `scripts/fuzz.sh` builds it
// with `-Xswiftc -sanitize=fuzzer,address` (one flag: of two `-sanitize` flags only the last counts), which instruments the main package's modules too
// (coverage feedback has to come from the parsers, not just from this harness).

/// A path dependency's identity is its directory's name (a fresh clone's, a worktree's, …).
let mainPackage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let mainIdentity = mainPackage.lastPathComponent.lowercased()

let package = Package(
    name: "WaybillFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: mainPackage.path)],
    targets: [
        // The entry point SwiftPM's debug link expects (see its source file).
        .target(name: "CFuzzerEntry"),
        .executableTarget(
            name: "WaybillFuzz",
            dependencies: [
                "CFuzzerEntry",
                .product(name: "WaybillFuzzable", package: mainIdentity),
                .product(name: "WaybillClient", package: mainIdentity),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .unsafeFlags(["-parse-as-library", "-sanitize=fuzzer,address"]),
            ],
            linkerSettings: [.unsafeFlags(["-sanitize=fuzzer,address"])]
        )
    ]
)
