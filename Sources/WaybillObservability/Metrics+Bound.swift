extension Metrics {
    /// The bounds on memory and work that the server enforces, one label value each of
    /// `waybill_bound_overflows_total` (docs/HARDENING.md lists each bound and what happens past it).
    public enum Bound: String, CaseIterable, Sendable {
        /// A broker subscription's buffer was full: its oldest batch was dropped (the feed reads
        /// the gap from the store).
        case brokerBuffer = "broker_buffer"
        /// The hub feed's input queue was full: its oldest input was dropped (same recovery).
        case feedInputs = "feed_inputs"
        /// The network service thread's work queue was full: the work was refused and every
        /// socket closed with 1013.
        case serviceQueue = "service_queue"
        /// Live events buffered during a socket's replay passed the bound: the socket was closed with 4008.
        case replayBuffer = "replay_buffer"
        /// Too many replay queries at once: the socket was closed with 1013.
        case replayQueries = "replay_queries"
        /// A socket's replay query did not answer in time: closed with 1013.
        case replayTime = "replay_time"
        /// Too many WebSocket authentications at once: the socket was closed with 1013.
        case socketAuthentications = "socket_authentications"
        /// A WebSocket was not authenticated in time: closed with 1013.
        case socketAuthenticationTime = "socket_authentication_time"
        /// A `?ticket=` that cannot be a ticket: refused with 4001 without a store write.
        case malformedTicket = "malformed_ticket"
        /// A bearer token that cannot be a token (not 43 URL-safe base64 characters): refused with
        /// 401 (or 4001) without a store read.
        case malformedToken = "malformed_token"
        /// A socket sent text frames faster than its budget: closed with 1008.
        case inboundFrames = "inbound_frames"
        /// A user already had `maxSocketsPerUser` sockets open on this node: the new one was closed with 1013.
        case socketsPerUser = "sockets_per_user"
        /// A user made API requests faster than `--user-requests-per-second` allows on this node:
        /// answered 429 `rate_limited` before the handler ran.
        case userRequests = "user_requests"
    }
}
