/// The broker's optional log hook, callable like a function; does nothing without a handler.
struct RedisLog: Sendable {
    var handler: RedisBroker.LogHandler?

    func callAsFunction(_ level: RedisBroker.LogLevel, _ message: String, _ fields: [String: String] = [:]) {
        handler?(level, message, fields)
    }
}
