/// Byte comparison whose time depends only on the lengths: where a secret (a token or ticket
/// hash, a password hash, the metrics token) is checked, timing must not tell an attacker how
/// many leading bytes of a guess were right. The one implementation the stores and the API share.
public enum ConstantTime {
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
