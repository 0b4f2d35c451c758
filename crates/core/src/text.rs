//! Text that came from outside (a PACS answer, a DICOM header, an SR, a file name, a model's
//! output) made safe to show: [`shown`] writes every control character as a visible escape,
//! so such text can never clear a terminal, set its title, move the cursor, forge a line or
//! reorder what follows it on screen.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` would act on a terminal or on the layout of a line instead of being shown: C0
/// and C1 controls, DEL, and the Unicode bidirectional and line/paragraph separators.
#[must_use]
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with each control character written as `\u{…}` (a tab, a carriage return and a
/// line feed as `\t`, `\r`, `\n`): one line of plain text whatever `text` holds.
#[must_use]
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c if is_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A DICOM person name (`FAMILY^GIVEN^MIDDLE^PREFIX^SUFFIX`, PN) as people write it:
/// `FAMILY, GIVEN MIDDLE`, prefix and suffix around it, its alphabetic group only; any other
/// text as it is. Shown with [`shown`], so control characters stay visible.
#[must_use]
pub fn person_name(name: &str) -> String {
    let alphabetic = name.split('=').next().unwrap_or_default();
    if !alphabetic.contains('^') {
        return shown(alphabetic.trim()).into_owned();
    }
    let parts: Vec<&str> = alphabetic.split('^').map(str::trim).collect();
    let part = |index: usize| parts.get(index).copied().unwrap_or_default();
    let given: Vec<&str> = [part(1), part(2)]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect();
    let mut written = part(0).to_string();
    if !given.is_empty() {
        if !written.is_empty() {
            written.push_str(", ");
        }
        written.push_str(&given.join(" "));
    }
    if !part(3).is_empty() {
        written = format!("{} {written}", part(3));
    }
    if !part(4).is_empty() {
        written = format!("{written}, {}", part(4));
    }
    shown(&written).into_owned()
}

/// `text` as lines for a terminal (a model's report): its line breaks and tabs kept, every
/// other control character ([`is_control`], bidirectional controls included) shown as `�`.
#[must_use]
pub fn shown_lines(text: &str) -> String {
    text.chars()
        .map(|c| {
            if is_control(c) && c != '\n' && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// [`shown`], cut to at most `max_chars` characters (with `…` when cut).
#[must_use]
pub fn shown_short(text: &str, max_chars: usize) -> String {
    let text = shown(text);
    if text.chars().count() <= max_chars {
        return text.into_owned();
    }
    let mut out: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` as a CSV cell a spreadsheet shows as text, never runs: a cell that starts with
/// `=`, `+`, `-`, `@`, a tab or a carriage return (a formula, or a DDE call, to a
/// spreadsheet) gets a leading `'`; then quoted as RFC 4180 asks when it holds a comma,
/// quote or line break.
#[must_use]
pub fn csv_cell(text: &str) -> String {
    let text = defused(text);
    if text.contains([',', '"', '\n', '\r']) {
        csv_quoted(&text)
    } else {
        text.into_owned()
    }
}

/// [`csv_cell`], always quoted (for tables whose text columns are all quoted).
#[must_use]
pub fn csv_quoted(text: &str) -> String {
    format!("\"{}\"", defused(text).replace('"', "\"\""))
}

/// `text` with a leading `'` when a spreadsheet would take it for a formula.
#[must_use]
pub fn defused(text: &str) -> Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_shown_as_text_never_run() {
        assert_eq!(
            csv_cell("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        assert_eq!(csv_cell("+1"), "'+1");
        assert_eq!(csv_cell("-2+3"), "'-2+3");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_cell("Dr. Ana, MD"), "\"Dr. Ana, MD\"");
        assert_eq!(csv_cell("ana"), "ana");
        assert_eq!(csv_quoted("=1"), "\"'=1\"");
        assert_eq!(csv_quoted("reader \"1\""), "\"reader \"\"1\"\"\"");
    }

    #[test]
    fn person_names_read_as_people_write_them() {
        assert_eq!(person_name("LIMA^ANA"), "LIMA, ANA");
        assert_eq!(person_name("DOE^JANE^Q^Dr.^MD"), "Dr. DOE, JANE Q, MD");
        assert_eq!(person_name("Yamada^Tarou=山田^太郎"), "Yamada, Tarou");
        assert_eq!(person_name("^ANA"), "ANA");
        assert_eq!(person_name("Dr. Ana Lima"), "Dr. Ana Lima");
        assert_eq!(person_name("EVE^\u{1b}[2J"), "EVE, \\u{1b}[2J");
    }

    #[test]
    fn escapes_clear_screen_title_backspace_and_newlines_become_visible_text() {
        let hostile = "Doe\u{1b}[2J\u{1b}]0;owned\u{7}\r\nreview by Eve\u{8}\u{202e}x";
        let safe = shown(hostile);
        assert!(!safe.chars().any(is_control), "{safe}");
        assert_eq!(
            safe,
            "Doe\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\r\\nreview by Eve\\u{8}\\u{202e}x"
        );
    }

    #[test]
    fn plain_text_is_not_copied_and_long_text_is_cut() {
        assert!(matches!(shown("Müller^Anna 1.2.3"), Cow::Borrowed(_)));
        assert_eq!(shown_short("abcdef", 4), "abc…");
        assert_eq!(shown_short("abc", 4), "abc");
    }

    #[test]
    fn model_text_cannot_drive_the_terminal() {
        let answer = "Liver: no tumor.\u{1b}]0;pwned\u{7}\n\u{1b}[2JKey slice: 4\u{8}\tok";
        let shown = shown_lines(answer);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert_eq!(shown.lines().count(), 2, "newlines stay");
        assert!(shown.starts_with("Liver: no tumor.\u{FFFD}]0;pwned\u{FFFD}"));
        // A bidirectional override cannot reorder what follows it on screen.
        assert_eq!(
            shown_lines("Liver: \u{202e}romut on"),
            "Liver: \u{FFFD}romut on"
        );
    }
}
