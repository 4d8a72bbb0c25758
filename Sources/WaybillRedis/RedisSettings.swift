/// What the publisher and subscriber threads need to know, fixed at `RedisBroker.init`.
struct RedisSettings: Sendable {
    var url: RedisURL
    var channel: String
    var connectTimeout: Duration
    var commandTimeout: Duration
    var heartbeatInterval: Duration = .seconds(1)
    var heartbeatTimeout: Duration = .seconds(2)
    /// The publisher connects afresh before a PUBLISH after this long without one (see `RedisPublisher`).
    var publisherIdleReconnect: Duration = .seconds(30)
}
