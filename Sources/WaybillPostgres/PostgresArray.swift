/// PostgreSQL array literals in text form (`{"a","b",NULL}`), for `unnest($1::text[])`: one
/// parameter carries a whole column, so a batch of rows costs one statement and one round trip.
enum PostgresArray {
    /// Every element quoted (so commas, braces, spaces and the word NULL stay data), with `"` and
    /// `\` escaped; `nil` is SQL NULL. NUL characters are refused by the text parameter itself.
    static func literal(_ elements: [String?]) -> String {
        var out = "{"
        for (index, element) in elements.enumerated() {
            if index > 0 { out += "," }
            guard let element else {
                out += "NULL"
                continue
            }
            out += "\""
            for character in element.unicodeScalars {
                if character == "\"" || character == "\\" { out += "\\" }
                out.unicodeScalars.append(character)
            }
            out += "\""
        }
        return out + "}"
    }

    static func literal(_ elements: [String]) -> String { literal(elements.map { Optional($0) }) }
}
