//! The subset of ECMA-262 regular expressions the fused validator accepts in
//! `pattern`, translated into `regex` syntax the way `jsonschema` translates
//! it (the property tests check the translation against `jsonschema`).
//! Patterns outside the subset give `None`, and the validator then declines
//! the schema, leaving it to `jsonschema` itself.

use std::fmt::Write as _;

use regex::{Regex, RegexBuilder};

use crate::validate::patterns::PatternBudget;

/// Deepest group nesting in a `pattern`.
const MAX_GROUP_DEPTH: usize = 16;
/// Largest `{n,m}` bound in a `pattern`.
const MAX_REPEAT: u32 = 1000;

/// ECMA-262 `\s`, as `jsonschema` translates it.
const ECMA_SPACE: &str = r"\x{9}-\x{d}\x{20}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}-\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}";
const DIGIT: &str = "0-9";
const WORD: &str = "A-Za-z0-9_";

/// Translates a pattern in the supported subset of ECMA-262 into `regex` syntax; `None` outside it.
fn translate_pattern(pattern: &str) -> Option<String> {
    let mut translator = Translator {
        chars: pattern.chars().collect(),
        pos: 0,
        out: String::with_capacity(pattern.len() * 2),
        depth: 0,
        consumes: false,
    };
    translator.alternation()?;
    (translator.pos == translator.chars.len()).then_some(translator.out)
}

struct Translator {
    chars: Vec<char>,
    pos: usize,
    out: String,
    depth: usize,
    /// Whether the current group has an atom that consumes a character.
    consumes: bool,
}

/// What an escape stands for.
enum Escaped {
    Char(char),
    Class { set: &'static str, negated: bool },
}

impl Translator {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos.checked_add(offset)?).copied()
    }

    fn literal(&mut self, c: char) {
        if c.is_ascii_alphanumeric() {
            self.out.push(c);
        } else {
            let _ = write!(self.out, "\\x{{{:x}}}", u32::from(c));
        }
    }

    fn alternation(&mut self) -> Option<()> {
        self.sequence()?;
        while self.peek() == Some('|') {
            self.pos += 1;
            self.out.push('|');
            self.sequence()?;
        }
        Some(())
    }

    fn sequence(&mut self) -> Option<()> {
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let quantifiable = self.atom()?;
            self.quantifier(quantifiable)?;
        }
        Some(())
    }

    /// Returns whether the atom may take a quantifier.
    fn atom(&mut self) -> Option<bool> {
        let c = self.peek()?;
        self.pos += 1;
        if !matches!(c, '^' | '$' | '(') {
            self.consumes = true;
        }
        match c {
            '^' | '$' => {
                self.out.push(c);
                Some(false)
            }
            '.' => {
                self.out.push_str(r"[^\x{a}\x{d}\x{2028}\x{2029}]");
                Some(true)
            }
            '(' => {
                if self.peek() == Some('?') {
                    if self.peek_at(1) != Some(':') {
                        return None;
                    }
                    self.pos += 2;
                }
                self.depth += 1;
                if self.depth > MAX_GROUP_DEPTH {
                    return None;
                }
                self.out.push_str("(?:");
                let outer = std::mem::replace(&mut self.consumes, false);
                self.alternation()?;
                if self.peek() != Some(')') {
                    return None;
                }
                let consumes = self.consumes;
                self.consumes |= outer;
                self.pos += 1;
                self.depth -= 1;
                self.out.push(')');
                // `jsonschema` rejects a quantified group that matches nothing but "".
                Some(consumes)
            }
            '[' => {
                self.class()?;
                Some(true)
            }
            '\\' => {
                match self.escape()? {
                    Escaped::Char(c) => self.literal(c),
                    Escaped::Class { set, negated } => {
                        self.out.push('[');
                        if negated {
                            self.out.push('^');
                        }
                        self.out.push_str(set);
                        self.out.push(']');
                    }
                }
                Some(true)
            }
            '*' | '+' | '?' | '{' | '}' | ']' | ')' => None,
            c => {
                self.literal(c);
                Some(true)
            }
        }
    }

    fn escape(&mut self) -> Option<Escaped> {
        let c = self.peek()?;
        self.pos += 1;
        let class = |set, negated| Some(Escaped::Class { set, negated });
        match c {
            'd' => class(DIGIT, false),
            'D' => class(DIGIT, true),
            'w' => class(WORD, false),
            'W' => class(WORD, true),
            's' => class(ECMA_SPACE, false),
            'S' => class(ECMA_SPACE, true),
            't' => Some(Escaped::Char('\t')),
            'n' => Some(Escaped::Char('\n')),
            'r' => Some(Escaped::Char('\r')),
            'f' => Some(Escaped::Char('\u{c}')),
            'v' => Some(Escaped::Char('\u{b}')),
            '\\' | '^' | '$' | '.' | '|' | '?' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}'
            | '/' | '-' => Some(Escaped::Char(c)),
            _ => None,
        }
    }

    fn quantifier(&mut self, quantifiable: bool) -> Option<()> {
        match self.peek() {
            Some(c @ ('*' | '+' | '?')) => {
                if !quantifiable {
                    return None;
                }
                self.pos += 1;
                self.out.push(c);
            }
            Some('{') => {
                if !quantifiable {
                    return None;
                }
                self.pos += 1;
                let min = self.number()?;
                let mut max = Some(min);
                if self.peek() == Some(',') {
                    self.pos += 1;
                    max = if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.number()?)
                    };
                }
                if self.peek() != Some('}') || max.is_some_and(|max| max < min) {
                    return None;
                }
                self.pos += 1;
                let _ = match max {
                    Some(max) => write!(self.out, "{{{min},{max}}}"),
                    None => write!(self.out, "{{{min},}}"),
                };
            }
            _ => return Some(()),
        }
        if self.peek() == Some('?') {
            self.pos += 1;
            self.out.push('?');
        }
        match self.peek() {
            Some('*' | '+' | '?' | '{') => None,
            _ => Some(()),
        }
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        let mut value: u32 = 0;
        while let Some(digit) = self.peek().and_then(|c| c.to_digit(10)) {
            value = value.checked_mul(10)?.checked_add(digit)?;
            self.pos += 1;
        }
        (self.pos > start && value <= MAX_REPEAT).then_some(value)
    }

    fn class(&mut self) -> Option<()> {
        self.out.push('[');
        if self.peek() == Some('^') {
            self.pos += 1;
            self.out.push('^');
        }
        if self.peek() == Some(']') {
            return None;
        }
        let mut first = true;
        loop {
            let c = self.peek()?;
            if c == ']' {
                self.pos += 1;
                self.out.push(']');
                return Some(());
            }
            if c == '['
                || matches!(
                    (c, self.peek_at(1)),
                    ('&', Some('&')) | ('~', Some('~')) | ('-', Some('-'))
                )
            {
                return None;
            }
            if c == '-' {
                // Only a first or last hyphen is a plain character.
                if !(first || self.peek_at(1) == Some(']')) {
                    return None;
                }
                self.pos += 1;
                self.literal('-');
                first = false;
                continue;
            }
            let start = self.class_atom()?;
            first = false;
            match start {
                Escaped::Class { set, negated } => {
                    if negated {
                        self.out.push_str("[^");
                        self.out.push_str(set);
                        self.out.push(']');
                    } else {
                        self.out.push_str(set);
                    }
                    if self.peek() == Some('-') && self.peek_at(1) != Some(']') {
                        return None;
                    }
                }
                Escaped::Char(low) => {
                    if self.peek() == Some('-') && self.peek_at(1) != Some(']') {
                        self.pos += 1;
                        if self.peek() == Some('-') {
                            return None;
                        }
                        let Escaped::Char(high) = self.class_atom()? else {
                            return None;
                        };
                        if high < low {
                            return None;
                        }
                        self.literal(low);
                        self.out.push('-');
                        self.literal(high);
                        if self.peek() == Some('-') && self.peek_at(1) != Some(']') {
                            return None;
                        }
                    } else {
                        self.literal(low);
                    }
                }
            }
        }
    }

    fn class_atom(&mut self) -> Option<Escaped> {
        let c = self.peek()?;
        match c {
            '\\' => {
                self.pos += 1;
                self.escape()
            }
            '[' | ']' => None,
            c => {
                self.pos += 1;
                Some(Escaped::Char(c))
            }
        }
    }
}

/// A compiled `pattern`.
#[derive(Debug, Clone)]
pub(super) enum Pattern {
    Regex(Regex),
    /// `^[set]{min,max}$` over ASCII characters: a bitmap test per byte, no regex engine.
    Run {
        set: [u64; 2],
        min: u64,
        max: u64,
    },
}

impl Pattern {
    /// The pattern compiled within what `budget` leaves (see [`crate::validate::patterns`]);
    /// `None` outside the subset or past the bounds.
    pub(super) fn compile(pattern: &str, budget: &mut PatternBudget) -> Option<Pattern> {
        let translated = translate_pattern(pattern)?;
        let regex = budget
            .compile(|limit| RegexBuilder::new(&translated).size_limit(limit).build())
            .ok()?;
        Some(match run_of(pattern) {
            Some((set, min, max)) if run_agrees(&regex, set, min, max) => {
                Pattern::Run { set, min, max }
            }
            _ => Pattern::Regex(regex),
        })
    }

    #[inline]
    pub(super) fn is_match(&self, s: &str) -> bool {
        match self {
            Pattern::Regex(regex) => regex.is_match(s),
            Pattern::Run { set, min, max } => {
                let len = s.len() as u64;
                *min <= len
                    && len <= *max
                    && s.bytes().all(|b| {
                        let bit = 1u64 << (b & 63);
                        match b {
                            0..=63 => set[0] & bit != 0,
                            64..=127 => set[1] & bit != 0,
                            _ => false,
                        }
                    })
            }
        }
    }
}

/// `^[class]quantifier$` with a class of ASCII letters, digits, ranges of them, `\d`, `\w` and
/// the characters `_ . @ +` (and `-` first or last): its set and length bounds.
fn run_of(pattern: &str) -> Option<([u64; 2], u64, u64)> {
    let body = pattern.strip_prefix("^[")?.strip_suffix('$')?;
    let (class, quantifier) = body.split_once(']')?;
    let (min, max) = match quantifier {
        "+" => (1, u64::MAX),
        "*" => (0, u64::MAX),
        _ => {
            let bounds = quantifier.strip_prefix('{')?.strip_suffix('}')?;
            let number = |text: &str| {
                text.parse::<u64>()
                    .ok()
                    .filter(|n| *n <= u64::from(MAX_REPEAT))
            };
            match bounds.split_once(',') {
                None => (number(bounds)?, number(bounds)?),
                Some((low, "")) => (number(low)?, u64::MAX),
                Some((low, high)) => (number(low)?, number(high)?),
            }
        }
    };
    if min > max {
        return None;
    }
    let mut set = [0u64; 2];
    let mut add = |c: u8| {
        if let Some(word) = set.get_mut(usize::from(c >> 6)) {
            *word |= 1u64 << (c & 63);
        }
    };
    let chars: Vec<u8> = class.bytes().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            b'\\' => {
                match chars.get(i + 1)? {
                    b'd' => (b'0'..=b'9').for_each(&mut add),
                    b'w' => (b'0'..=b'9')
                        .chain(b'a'..=b'z')
                        .chain(b'A'..=b'Z')
                        .chain([b'_'])
                        .for_each(&mut add),
                    _ => return None,
                }
                i += 2;
            }
            b'-' if i == 0 || i + 1 == chars.len() => {
                add(c);
                i += 1;
            }
            c if c.is_ascii_alphanumeric() => {
                if chars.get(i + 1) == Some(&b'-') && i + 2 < chars.len() {
                    let high = *chars.get(i + 2)?;
                    if !high.is_ascii_alphanumeric() || high < c {
                        return None;
                    }
                    (c..=high).for_each(&mut add);
                    i += 3;
                } else {
                    add(c);
                    i += 1;
                }
            }
            b'_' | b'.' | b'@' | b'+' => {
                if chars.get(i + 1) == Some(&b'-') && i + 2 < chars.len() {
                    return None;
                }
                add(c);
                i += 1;
            }
            _ => return None,
        }
    }
    (set != [0, 0]).then_some((set, min, max))
}

/// Double-checks a [`Pattern::Run`] against the translated regex: every ASCII character, at the
/// lengths around the bounds, and a few non-ASCII ones.
fn run_agrees(regex: &Regex, set: [u64; 2], min: u64, max: u64) -> bool {
    let run = Pattern::Run { set, min, max };
    let lengths = [
        min.saturating_sub(1),
        min,
        min.saturating_add(1),
        max,
        max.saturating_add(1),
    ];
    let lengths: Vec<usize> = lengths
        .into_iter()
        .filter_map(|len| usize::try_from(len).ok().filter(|len| *len <= 64))
        .collect();
    let ascii = (0u8..128).map(char::from);
    let others = ['é', '\u{2028}', '\u{feff}', '\u{212a}', '😀'];
    ascii.chain(others).all(|c| {
        lengths.iter().all(|&len| {
            let subject: String = std::iter::repeat_n(c, len).collect();
            run.is_match(&subject) == regex.is_match(&subject)
        })
    })
}
