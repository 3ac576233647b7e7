//! Which tokens of a row a masked LM predicts, and what it sees in their place. The row's text
//! is cut into masking units — single tokens, whole words, phrases or entities: a position
//! joins the unit of the position before it when its flag says so — and units are selected
//! (alone, or ALBERT's n-gram spans of consecutive units) until the row's quota of tokens is
//! reached. A selected token becomes the mask token 80% of the time, a random token 10% and
//! stays itself 10% (BERT's recipe), or the mask token 85% of the time and itself otherwise
//! (ELECTRA's).

use rand::seq::SliceRandom;
use rand::{rngs::StdRng, Rng};

/// What a selected token becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Replacement {
    /// The mask token 80% of the time, a random token 10%, itself 10% (BERT, Devlin et al.
    /// 2019, §3.1).
    #[default]
    Bert,
    /// The mask token 85% of the time, itself 15% (ELECTRA's generator input, Clark et al.
    /// 2020; no random tokens, the generator supplies those).
    Electra,
}

impl Replacement {
    /// The uniform draw below which a token is masked, and from which it is replaced by a
    /// random one.
    fn thresholds(self) -> (f64, f64) {
        match self {
            Replacement::Bert => (0.8, 0.9),
            Replacement::Electra => (0.85, f64::INFINITY),
        }
    }
}

/// The longest span n-gram masking may select.
pub const MAX_NGRAM: usize = 8;

/// How a row's selected tokens are replaced, and how much is selected.
pub(super) struct Selection<'a> {
    /// Fraction of the text tokens selected (BERT: 0.15).
    pub probability: f64,
    /// Spans of up to this many consecutive units, a span of n drawn with p(n) ∝ 1/n.
    pub max_ngram: usize,
    pub mask: u32,
    /// Ids a selected token may be replaced with (the vocabulary less the special tokens).
    pub replacements: &'a [u32],
    pub replacement: Replacement,
}

/// A span length in 1..=`longest` with p(n) ∝ 1/n.
pub(super) fn draw_ngram(rng: &mut StdRng, longest: usize) -> usize {
    let total: f64 = (1..=longest).map(|n| 1.0 / n as f64).sum();
    let mut r = rng.random::<f64>() * total;
    for n in 1..longest {
        r -= 1.0 / n as f64;
        if r < 0.0 {
            return n;
        }
    }
    longest
}

/// The units of `text_positions` (ascending): a position whose `joins` flag is set continues
/// the unit of the position just before it, when that one is text too.
fn units(text_positions: &[usize], joins: &[bool]) -> Vec<Vec<usize>> {
    let mut units: Vec<Vec<usize>> = Vec::new();
    for &p in text_positions {
        match units.last_mut() {
            Some(unit) if joins[p] && unit.last() == Some(&(p - 1)) => unit.push(p),
            _ => units.push(vec![p]),
        }
    }
    units
}

impl Selection<'_> {
    /// Selects round(probability × text tokens) (at least one) of `ids`' text positions by
    /// whole units and replaces them; returns the labels (−100 where not selected).
    pub fn apply(&self, ids: &mut [u32], joins: &[bool], text_positions: &[usize], rng: &mut StdRng) -> Vec<i64> {
        let mut labels = vec![-100i64; ids.len()];
        let units = units(text_positions, joins);
        let wanted = ((text_positions.len() as f64 * self.probability).round() as usize).max(1);
        // Spans start at the units in a random order; one of n units (n drawn, and shortened
        // until it fits what is left to select) is taken unless it overlaps one taken before.
        // A unit longer than what is left is passed over.
        let mut starts: Vec<usize> = (0..units.len()).collect();
        starts.shuffle(rng);
        // Every unit longer than the quota (a phrase filling a short row): the shortest goes
        // over it, so that no row goes without a prediction.
        if let Some(&shortest) = starts.iter().min_by_key(|&&u| units[u].len()).filter(|&&u| units[u].len() > wanted) {
            starts = vec![shortest];
        }
        let wanted = if starts.len() == 1 { wanted.max(units[starts[0]].len()) } else { wanted };
        let mut taken = vec![false; units.len()];
        let mut selected = 0;
        let span_tokens = |start: usize, n: usize| units[start..start + n].iter().map(Vec::len).sum::<usize>();
        for start in starts {
            if selected >= wanted {
                break;
            }
            let longest = self.max_ngram.min(units.len() - start);
            let mut n = if longest > 1 { draw_ngram(rng, longest) } else { 1 };
            while n > 1 && selected + span_tokens(start, n) > wanted {
                n -= 1;
            }
            if selected + span_tokens(start, n) > wanted || taken[start..start + n].contains(&true) {
                continue;
            }
            taken[start..start + n].fill(true);
            selected += span_tokens(start, n);
            for &p in units[start..start + n].iter().flatten() {
                labels[p] = ids[p] as i64;
                let r: f64 = rng.random();
                let (mask_below, random_from) = self.replacement.thresholds();
                if r < mask_below {
                    ids[p] = self.mask;
                } else if r >= random_from {
                    ids[p] = self.replacements[rng.random_range(0..self.replacements.len())];
                }
            }
        }
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::training::rng_for;

    #[test]
    fn ngram_spans_are_drawn_with_probability_inverse_to_their_length() {
        let mut rng = rng_for(9, 0);
        let mut counts = [0usize; 4];
        for _ in 0..33_000 {
            counts[draw_ngram(&mut rng, 3)] += 1;
        }
        for (n, want) in [(1, 6.0 / 11.0), (2, 3.0 / 11.0), (3, 2.0 / 11.0)] {
            let share = counts[n] as f64 / 33_000.0;
            assert!((share - want).abs() < 0.01, "n = {n}: {share:.4}, want {want:.4}");
        }
    }

    #[test]
    fn electra_masks_85_percent_and_keeps_the_rest() {
        let joins = [false; 21];
        let text: Vec<usize> = (1..21).collect();
        let selection = Selection { probability: 0.5, max_ngram: 1, mask: 99, replacements: &[50], replacement: Replacement::Electra };
        let (mut masked, mut kept) = (0usize, 0usize);
        for index in 0..1000 {
            let mut ids: Vec<u32> = (0..21).collect();
            let labels = selection.apply(&mut ids, &joins, &text, &mut rng_for(9, index));
            for p in (0..21).filter(|&p| labels[p] != -100) {
                match ids[p] {
                    99 => masked += 1,
                    id if id == p as u32 => kept += 1,
                    other => panic!("position {p} became {other}: ELECTRA draws no random tokens"),
                }
            }
        }
        let share = masked as f64 / (masked + kept) as f64;
        // 10,000 selections: 5 standard deviations of the share are under 0.018.
        assert!((share - 0.85).abs() < 0.018, "masked share {share}");
    }

    #[test]
    fn units_follow_the_join_flags_within_runs_of_text() {
        // Position 3 is not text (a separator): 4 cannot join 2 across it.
        let joins = [false, false, true, false, true, true, false];
        assert_eq!(units(&[1, 2, 4, 5, 6], &joins), vec![vec![1, 2], vec![4, 5], vec![6]]);
    }

    #[test]
    fn units_are_selected_whole_and_the_quota_is_kept() {
        // Ten text positions in units of 1, 3, 2, 1, 3 tokens; 40% wanted: 4 tokens.
        let joins = [false, false, false, true, true, false, true, false, false, true, true];
        let text: Vec<usize> = (1..11).collect();
        let selection = Selection { probability: 0.4, max_ngram: 1, mask: 99, replacements: &[50], replacement: Replacement::Bert };
        let all_units = units(&text, &joins);
        let mut counts = vec![0usize; all_units.len()];
        for index in 0..2000 {
            let mut ids: Vec<u32> = (0..11).collect();
            let labels = selection.apply(&mut ids, &joins, &text, &mut rng_for(4, index));
            let picked: Vec<usize> = (0..11).filter(|&p| labels[p] != -100).collect();
            assert_eq!(picked.len(), 4, "{picked:?}");
            for (unit, count) in all_units.iter().zip(&mut counts) {
                let inside = unit.iter().filter(|p| picked.contains(p)).count();
                assert!(inside == 0 || inside == unit.len(), "unit {unit:?} cut by {picked:?}");
                *count += (inside > 0) as usize;
            }
            assert!(picked.iter().all(|&p| labels[p] == p as i64 && [99, 50, p as u32].contains(&ids[p])));
        }
        assert!(counts.iter().all(|&c| c > 100), "every unit is selected now and then: {counts:?}");
        // Every unit over the quota: the shortest is selected whole all the same.
        let (joins, text) = ([false, false, true, true, false, true], [1, 2, 3, 4, 5]);
        let mut ids: Vec<u32> = (0..6).collect();
        let one_token = Selection { probability: 0.2, ..selection };
        let labels = one_token.apply(&mut ids, &joins, &text, &mut rng_for(4, 0));
        assert_eq!(labels.iter().map(|&l| l != -100).collect::<Vec<_>>(), [false, false, false, false, true, true], "{labels:?}");
    }
}
