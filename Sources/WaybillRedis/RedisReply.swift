import CHiredis

/// A reply from Redis, copied out of hiredis's `redisReply` so it can outlive `freeReplyObject`.
indirect enum RedisReply: Equatable {
    case status(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8])
    case null
    case array([RedisReply])

    /// Copies `reply` (and its elements); the caller still frees it.
    init(copying reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return str.withMemoryRebound(to: UInt8.self, capacity: r.len) {
                Array(UnsafeBufferPointer(start: $0, count: r.len))
            }
        }
        switch r.type {
        case REDIS_REPLY_STRING: self = .bulk(bytes())
        case REDIS_REPLY_STATUS: self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(r.integer)
        case REDIS_REPLY_ARRAY:
            var items: [RedisReply] = []
            if let elements = r.element {
                items.reserveCapacity(r.elements)
                for index in 0..<r.elements {
                    items.append(elements[index].map { RedisReply(copying: $0) } ?? .null)
                }
            }
            self = .array(items)
        default: self = .null
        }
    }

    /// The text of a bulk or status reply (`"message"`, `"pong"`), nil otherwise.
    var text: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }
}
