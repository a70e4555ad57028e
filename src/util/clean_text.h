// Text others read: a string from a client or the kernel (a lease's name, a
// unit, a cgroup path, a summary, an attribute) reaches terminals, the
// journal and Prometheus. A terminal obeys escape sequences (ESC, CSI, OSC
// retitle a tmux pane, C1 controls act like ESC [), bidi overrides reorder
// what is shown, and Prometheus refuses a whole exposition over one byte that
// is not UTF-8. So text is checked on the way in (refused when not clean)
// and made printable on the way out (whatever got in, or came from the kernel).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tally::text {

// Why `s` is not clean text, or nullopt: not UTF-8 (overlong forms and
// surrogates included), a C0 control or DEL, a C1 control (U+0080..U+009F),
// a bidirectional formatting character (U+061C, U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069), or an invisible or format character:
// Unicode's Default_Ignorable_Code_Point set (zero-width joiners and
// spaces, U+FEFF, variation selectors, tag characters U+E0000..U+E0FFF,
// Hangul fillers), the other format characters (category Cf: U+0600..U+0605,
// U+06DD, U+070F, U+0890, U+0891, U+08E2, U+110BD, U+110CD, U+13430..U+1343F,
// U+FFF9..U+FFFB) and the line and paragraph separators U+2028, U+2029. Each
// makes two names that read the same differ, or a name that reads as another
// (a lease "llama" and "lla\u{200D}ma"), or breaks a line where none shows.
std::optional<std::string> cleanTextProblem(std::string_view s);

// `s` with every byte that is not UTF-8 written as its hex value (0xff reads
// \xff) and every character cleanTextProblem() names written as its code
// point (ESC reads \u{001B}); anything else unchanged. The result is always
// clean text, and printable(printable(s)) == printable(s): a renderer may
// apply it to a cell and again to the line.
std::string printable(std::string_view s);

}  // namespace tally::text
