//! Cuts a streamed reply into sentences, so that each is spoken as soon as it is complete instead
//! of after the whole reply (the first sentence is what the user waits for).

/// A sentence shorter than this waits for the next one ("Hi." alone sounds clipped, and each
/// synthesis has a fixed cost).
const MIN_CHARS: usize = 12;
/// A clause longer than this is cut at its last comma or space (a model that never ends a
/// sentence must still be heard).
const MAX_CHARS: usize = 220;
/// The reply's first piece may end at a comma once it is this long: the user is waiting for it,
/// and a clause is a natural place for speech to pause while the rest is written.
const FIRST_CLAUSE_MIN_CHARS: usize = 16;
/// A first piece with no comma or sentence end by this length is cut at its last space: at the
/// small model's ~25 tokens a second a long first sentence kept the user waiting over a second
/// more (`local-turns`, `svc_local::timing`), and speech pausing between two words is heard as
/// a breath, while silence is heard as the agent not answering.
const FIRST_PIECE_MAX_CHARS: usize = 40;

/// Collects text pieces; hands out complete sentences (the first may be a clause).
#[derive(Debug, Default, Clone)]
pub struct SentenceSplitter {
    pending: String,
    /// A piece has been handed out.
    started: bool,
}

impl SentenceSplitter {
    /// Adds a piece of the reply; returns the sentences it completed.
    pub fn push(&mut self, piece: &str) -> Vec<String> {
        self.pending.push_str(piece);
        let mut out = Vec::new();
        while let Some(end) = self.sentence_end() {
            let rest = self.pending.split_off(end);
            let sentence = std::mem::replace(&mut self.pending, rest);
            let sentence = clean(&sentence);
            if !sentence.is_empty() {
                self.started = true;
                out.push(sentence);
            }
        }
        out
    }

    /// The rest of the reply (its end).
    pub fn finish(&mut self) -> Option<String> {
        let sentence = clean(&std::mem::take(&mut self.pending));
        (!sentence.is_empty()).then_some(sentence)
    }

    /// Byte index just past the first complete sentence, if there is one.
    fn sentence_end(&self) -> Option<usize> {
        let text = &self.pending;
        let mut chars = text.char_indices().peekable();
        while let Some((at, ch)) = chars.next() {
            let next = chars.peek().map(|(_, next)| *next);
            let boundary = match ch {
                '\n' => true,
                '.' | '!' | '?' | ';' | ':' => next.is_some_and(char::is_whitespace),
                _ => false,
            };
            let clause = !self.started && ch == ',' && next.is_some_and(char::is_whitespace);
            let end = at + ch.len_utf8();
            let length = text[..end].trim().chars().count();
            if (boundary && length >= MIN_CHARS) || (clause && length >= FIRST_CLAUSE_MIN_CHARS) {
                return Some(end);
            }
        }
        if !self.started && text.chars().count() > FIRST_PIECE_MAX_CHARS {
            let cut = text.char_indices().nth(FIRST_PIECE_MAX_CHARS).map_or(text.len(), |(at, _)| at);
            if let Some(at) = text[..cut].rfind(' ').filter(|&at| text[..at].trim().chars().count() >= MIN_CHARS) {
                return Some(at);
            }
        }
        if text.chars().count() > MAX_CHARS {
            let cut = text.char_indices().nth(MAX_CHARS).map_or(text.len(), |(at, _)| at);
            let head = &text[..cut];
            let at = head.rfind(", ").map(|at| at + 1).or_else(|| head.rfind(' ')).unwrap_or(cut);
            return Some(at.max(1));
        }
        None
    }
}

/// How much of a reply is spoken: a voice agent answers in a sentence or two, and a small model
/// left alone talks for half a minute. Pieces from the splitter are admitted until
/// `max_sentences` whole sentences are (a first clause does not count as one); then the reply is
/// complete and the rest of the generation is not wanted.
#[derive(Debug, Clone)]
pub struct VoiceBudget {
    max_sentences: usize,
    sentences: usize,
    admitted: usize,
}

impl VoiceBudget {
    /// A budget of `max_sentences` sentences (0: no limit).
    pub fn new(max_sentences: usize) -> VoiceBudget {
        VoiceBudget { max_sentences, sentences: 0, admitted: 0 }
    }

    /// The pieces of `pieces` still within the budget.
    pub fn admit(&mut self, pieces: Vec<String>) -> Vec<String> {
        let mut out = Vec::new();
        for piece in pieces {
            if self.is_full() {
                break;
            }
            if ends_sentence(&piece) {
                self.sentences += 1;
            }
            self.admitted += 1;
            out.push(piece);
        }
        out
    }

    /// The rest of a generation cut by its token limit: spoken only when it ends a sentence, or
    /// when nothing at all was said (a fragment is better than silence).
    pub fn admit_tail(&mut self, tail: Option<String>, cut_by_length: bool) -> Vec<String> {
        match tail {
            Some(tail) if !cut_by_length || self.admitted == 0 || ends_sentence(&tail) => self.admit(vec![tail]),
            _ => Vec::new(),
        }
    }

    /// Whether the reply has all the sentences it may have.
    pub fn is_full(&self) -> bool {
        self.max_sentences > 0 && self.sentences >= self.max_sentences
    }
}

/// Whether `piece` ends a sentence (rather than a clause, or mid-word); a semicolon counts, as
/// the splitter cuts there too (a small model's "1. Boil…; 2. Add…" is otherwise one endless
/// sentence). A colon does not: what it announces comes next, and a reply that stopped at "Here
/// are three ideas:" would promise and not say.
fn ends_sentence(piece: &str) -> bool {
    piece.trim_end_matches(['"', '\'', ')']).ends_with(['.', '!', '?', ';'])
}

/// What is spoken of a sentence: markdown and emphasis marks out, whitespace collapsed.
fn clean(sentence: &str) -> String {
    let stripped: String = sentence.chars().filter(|ch| !matches!(ch, '*' | '#' | '`' | '_' | '~')).collect();
    stripped.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pieces: &[&str]) -> Vec<String> {
        let mut splitter = SentenceSplitter::default();
        let mut out: Vec<String> = pieces.iter().flat_map(|piece| splitter.push(piece)).collect();
        out.extend(splitter.finish());
        out
    }

    #[test]
    fn sentences_come_out_as_soon_as_they_end() {
        let mut splitter = SentenceSplitter::default();
        assert!(splitter.push("The capital of France").is_empty());
        assert_eq!(splitter.push(" is Paris. It is"), ["The capital of France is Paris."]);
        assert!(splitter.push(" lovely").is_empty());
        assert_eq!(splitter.finish().as_deref(), Some("It is lovely"));
    }

    #[test]
    fn the_first_piece_may_be_a_clause_and_later_ones_are_sentences() {
        assert_eq!(
            split(&["Well, ", "the capital of France, ", "as you know, is Paris, a city of light. ", "Yes, it is."]),
            ["Well, the capital of France,", "as you know, is Paris, a city of light.", "Yes, it is."]
        );
    }

    #[test]
    fn a_long_first_piece_without_a_pause_is_cut_between_words() {
        let mut splitter = SentenceSplitter::default();
        assert!(splitter.push("I'm sorry but I don't have any ").is_empty());
        // Past 40 characters, cut at the last space within them (never inside a word).
        assert_eq!(splitter.push("information about that right now"), ["I'm sorry but I don't have any"]);
        assert!(splitter.push(" and I cannot help with it").is_empty(), "only the first piece is cut short");
        assert_eq!(splitter.push(" today. "), ["information about that right now and I cannot help with it today."]);
    }

    #[test]
    fn short_sentences_join_the_next_and_numbers_do_not_split() {
        assert_eq!(
            split(&["Hi. ", "How are you today? ", "It costs 3.50 dollars."]),
            ["Hi. How are you today?", "It costs 3.50 dollars."]
        );
    }

    #[test]
    fn the_voice_budget_keeps_two_sentences_and_drops_a_cut_tail() {
        let mut budget = VoiceBudget::new(2);
        assert_eq!(budget.admit(vec!["Well, the capital of France,".into()]), ["Well, the capital of France,"]);
        assert!(!budget.is_full(), "a clause is not a sentence");
        assert_eq!(
            budget.admit(vec!["as you know, is Paris.".into(), "It is lovely.".into(), "It has a tower.".into()]),
            ["as you know, is Paris.", "It is lovely."]
        );
        assert!(budget.is_full());
        assert!(budget.admit(vec!["More.".into()]).is_empty());
        // A tail cut by the token limit mid-sentence is not spoken once something was said…
        let mut budget = VoiceBudget::new(2);
        budget.admit(vec!["Sure thing.".into()]);
        assert!(budget.admit_tail(Some("and then the".into()), true).is_empty());
        assert_eq!(budget.admit_tail(Some("That is all!".into()), true), ["That is all!"]);
        // …but is when it is all there is, and a tail that ended normally is always spoken.
        assert_eq!(VoiceBudget::new(2).admit_tail(Some("and then the".into()), true), ["and then the"]);
        let mut budget = VoiceBudget::new(2);
        budget.admit(vec!["Sure thing.".into()]);
        assert_eq!(budget.admit_tail(Some("ok then".into()), false), ["ok then"]);
        let mut listing = VoiceBudget::new(2);
        listing.admit(vec!["To make tea:".into(), "1. Boil the water;".into()]);
        assert!(!listing.is_full(), "a colon announces what follows: it is not a sentence of its own");
        assert_eq!(listing.admit(vec!["2. Add the leaves.".into(), "3. Wait.".into()]), ["2. Add the leaves."]);
        assert!(listing.is_full(), "a semicolon ends a sentence");
        // No limit.
        let mut open = VoiceBudget::new(0);
        assert_eq!(open.admit(vec!["A.".into(), "B.".into(), "C.".into()]).len(), 3);
        assert!(!open.is_full());
    }

    #[test]
    fn markdown_is_not_read_aloud_and_runaway_clauses_are_cut() {
        assert_eq!(split(&["**Paris** is the `capital`."]), ["Paris is the capital."]);
        let long = "word, ".repeat(80);
        let parts = split(&[&long]);
        assert!(parts.len() >= 2, "{parts:?}");
        assert!(parts.iter().all(|part| part.chars().count() <= MAX_CHARS));
    }
}
