// swift-tools-version:6.0
import PackageDescription

/// Settings every Swift target shares (see docs/ARCHITECTURE.md, "Modules": C types stay out of public APIs).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Waybill",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "WaybillClient", targets: ["WaybillClient"]),
        // The client's Linux transports, with the network module their event loop comes from.
        .library(name: "WaybillClientTransports", targets: ["WaybillClientTransports", "WaybillNetwork"]),
        .executable(name: "waybill", targets: ["waybill"]),
        // Only for the fuzz targets in Fuzzing/ (a separate package, `make fuzz`, docs/HARDENING.md):
        // a package can use another's modules through products only.
        .library(
            name: "WaybillFuzzable",
            targets: ["WaybillNetwork", "WaybillRealtime", "WaybillAPI", "WaybillSQLite", "WaybillBroker",
                      "WaybillStorage", "WaybillDomain", "WaybillObservability", "WaybillJSON"]),
    ],
    targets: [
        // C libraries from the system, each imported by exactly one Swift module.
        // Also libev (ev.h, -lev): the server's foreign event loop; lws loads its libev plugin at run time.
        .systemLibrary(
            name: "CWebSockets", pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev", "libev-dev", "libwebsockets-evlib-ev"]), .brew(["libwebsockets", "libev"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(
            name: "CCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .systemLibrary(
            name: "CHiredis", path: "Sources/CHiredis", pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]),
        .systemLibrary(
            name: "CPostgres", path: "Sources/CPostgres", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),

        // Numbers and UTC times written as ASCII bytes: shared by the domain and the logger.
        .target(name: "WaybillText", swiftSettings: swiftSettings),
        // Pure rules: no I/O, Foundation and WaybillText only.
        .target(name: "WaybillDomain", dependencies: ["WaybillText"], swiftSettings: swiftSettings),
        // A strict JSON reader from bytes to a small tree: request bodies and broker batches
        // (Foundation's JSONDecoder was a large share of both, docs/BENCHMARKS.md).
        .target(name: "WaybillJSON", swiftSettings: swiftSettings),
        // The storage protocol (`OrderStore`, leases, queries); the stores are WaybillSQLite and WaybillPostgres.
        .target(name: "WaybillStorage", dependencies: ["WaybillDomain"], swiftSettings: swiftSettings),
        .target(
            name: "WaybillSQLite", dependencies: ["WaybillStorage", "WaybillDomain", "CSQLite"],
            swiftSettings: swiftSettings),
        // The cluster store: PostgreSQL over libpq (several nodes share one database).
        .target(
            name: "WaybillPostgres", dependencies: ["WaybillStorage", "WaybillDomain", "CPostgres"],
            swiftSettings: swiftSettings),
        // Broker protocol and the in-process broker.
        .target(name: "WaybillBroker", dependencies: ["WaybillDomain", "WaybillJSON"], swiftSettings: swiftSettings),
        // The Redis pub/sub broker (scale-out): hiredis on its own publisher and subscriber threads.
        .target(
            name: "WaybillRedis", dependencies: ["WaybillBroker", "WaybillDomain", "CHiredis"],
            swiftSettings: swiftSettings),
        // HTTP + WebSocket over libwebsockets (server and client).
        .target(name: "WaybillNetwork", dependencies: ["CWebSockets", "WaybillObservability"], swiftSettings: swiftSettings),
        // Logger, Metrics, Redaction: shared by the API and the live path (Foundation, Synchronization, WaybillText).
        .target(name: "WaybillObservability", dependencies: ["WaybillText"], swiftSettings: swiftSettings),
        // The live path: outbox relay (under a lease), hub feed (gaps, broker down, rewind), hub and its per-socket protocol.
        .target(
            name: "WaybillRealtime",
            dependencies: [
                "WaybillDomain", "WaybillStorage", "WaybillBroker", "WaybillNetwork", "WaybillObservability", "WaybillJSON",
            ],
            swiftSettings: swiftSettings),
        // REST API, auth, metrics endpoint: the server application.
        .target(
            name: "WaybillAPI",
            dependencies: [
                "WaybillDomain", "WaybillStorage", "WaybillBroker", "WaybillNetwork", "WaybillObservability",
                "WaybillRealtime", "WaybillJSON", "WaybillText", "CCrypto",
            ],
            resources: [.copy("Web")],
            swiftSettings: swiftSettings),
        // The driver client library (no server modules, no C).
        .target(name: "WaybillClient", swiftSettings: swiftSettings),
        // WaybillClient's transports over WaybillNetwork, for Linux programs (the `waybill driver` app).
        .target(
            name: "WaybillClientTransports", dependencies: ["WaybillClient", "WaybillNetwork"],
            swiftSettings: swiftSettings),
        // Test support with no server dependency: raw HTTP client, virtual clock, waiting helpers.
        .target(name: "WaybillTesting", swiftSettings: swiftSettings),
        // The store tests' shared data (a hand-set clock, the seeded companies and users, a sample order),
        // so the SQLite store's own tests and the conformance suite seed the same.
        .target(name: "WaybillStoreTesting", dependencies: ["WaybillDomain", "WaybillStorage"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "waybill",
            dependencies: ["WaybillAPI", "WaybillSQLite", "WaybillPostgres", "WaybillBroker", "WaybillRedis",
                           "WaybillNetwork", "WaybillStorage", "WaybillDomain", "WaybillClient",
                           "WaybillClientTransports", "WaybillObservability"],
            swiftSettings: swiftSettings),

        .testTarget(name: "WaybillDomainTests", dependencies: ["WaybillDomain"], swiftSettings: swiftSettings),
        .testTarget(name: "WaybillJSONTests", dependencies: ["WaybillJSON"], swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillSQLiteTests", dependencies: ["WaybillSQLite", "WaybillStorage", "WaybillDomain", "WaybillStoreTesting", "WaybillTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillPostgresTests",
            dependencies: ["WaybillPostgres", "WaybillStorage", "WaybillDomain", "WaybillTesting", "WaybillStoreTesting"],
            swiftSettings: swiftSettings),
        // One body per case, run against every store backend (SQLite in a temp dir, PostgreSQL started by the test).
        .testTarget(
            name: "WaybillStoreConformanceTests",
            dependencies: ["WaybillSQLite", "WaybillPostgres", "WaybillStorage", "WaybillDomain", "WaybillTesting",
                           "WaybillStoreTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillNetworkTests", dependencies: ["WaybillNetwork", "WaybillTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillAPITests",
            dependencies: ["WaybillTesting", "WaybillAPI", "WaybillNetwork", "WaybillDomain", "WaybillStorage",
                           "WaybillSQLite", "WaybillPostgres", "WaybillBroker", "WaybillClient",
                           "WaybillClientTransports", "WaybillObservability", "WaybillStoreTesting"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillRealtimeTests",
            dependencies: ["WaybillRealtime", "WaybillTesting", "WaybillDomain", "WaybillStorage", "WaybillSQLite",
                           "WaybillBroker", "WaybillNetwork", "WaybillObservability", "WaybillJSON", "WaybillStoreTesting"],
            swiftSettings: swiftSettings),
        // The fuzz targets (Fuzzing/, through the `Targets` link) replaying their seed corpus: the
        // harness is built with every `make test`, and each seed is a regression test.
        .testTarget(
            name: "WaybillFuzzSeedTests",
            dependencies: ["WaybillAPI", "WaybillNetwork", "WaybillRealtime", "WaybillSQLite", "WaybillBroker",
                           "WaybillStorage", "WaybillDomain", "WaybillObservability", "WaybillClient",
                           "WaybillTesting", "WaybillJSON"],
            exclude: ["Targets/Entry.swift"],
            swiftSettings: swiftSettings),
        // The broker conformance suite (in-process and Redis, one body each) and Redis's own failure tests.
        .testTarget(
            name: "WaybillBrokerTests",
            dependencies: ["WaybillBroker", "WaybillRedis", "WaybillDomain", "WaybillTesting", "WaybillJSON"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "WaybillClientTests", dependencies: ["WaybillClient", "WaybillTesting"], swiftSettings: swiftSettings),
        // The `waybill` command's own parts (flags, the driver app's screen and queue file), tested in process.
        .testTarget(name: "WaybillCommandTests", dependencies: ["waybill", "WaybillClient", "WaybillAPI"], swiftSettings: swiftSettings),
    ]
)
