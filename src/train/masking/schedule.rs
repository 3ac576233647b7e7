//! ERNIE's masking schedule (Sun et al. 2019, §3.2): the masking units' level, stage by stage.

use std::str::FromStr;

use crate::error::{arg_err, Result, SesameError};

/// What a masked unit is (ERNIE's three levels, Sun et al. 2019, §3.2): a token (or a whole
/// word with whole-word masking); a phrase; a named entity. Outside phrases (entities), the
/// units are those of the token level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskLevel {
    Token,
    Phrase,
    Entity,
}

impl MaskLevel {
    pub(super) const ALL: [MaskLevel; 3] = [MaskLevel::Token, MaskLevel::Phrase, MaskLevel::Entity];

    fn name(self) -> &'static str {
        match self {
            MaskLevel::Token => "token",
            MaskLevel::Phrase => "phrase",
            MaskLevel::Entity => "entity",
        }
    }
}

/// One stage of a [`MaskSchedule`]: its level, for `steps` optimizer steps (None: to the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskStage {
    pub level: MaskLevel,
    pub steps: Option<u64>,
}

/// The masking level by training step, written `token:1000,phrase:1000,entity` (the last
/// stage runs to the end) or a single level, `phrase`. ERNIE learns in this order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct MaskSchedule {
    stages: Vec<MaskStage>,
}

impl Default for MaskSchedule {
    fn default() -> MaskSchedule {
        MaskSchedule { stages: vec![MaskStage { level: MaskLevel::Token, steps: None }] }
    }
}

impl MaskSchedule {
    /// The level of optimizer step `step`.
    pub fn level_at(&self, step: u64) -> MaskLevel {
        let mut end = 0;
        for stage in &self.stages {
            match stage.steps {
                Some(steps) if step >= end + steps => end += steps,
                _ => return stage.level,
            }
        }
        self.stages[self.stages.len() - 1].level
    }

    pub fn uses(&self, level: MaskLevel) -> bool {
        self.stages.iter().any(|s| s.level == level)
    }

    pub fn stages(&self) -> &[MaskStage] {
        &self.stages
    }
}

impl FromStr for MaskSchedule {
    type Err = SesameError;

    fn from_str(text: &str) -> Result<MaskSchedule> {
        let op = "mask level";
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let mut stages = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let (name, steps) = match part.split_once(':') {
                Some((name, steps)) => (
                    name,
                    Some(steps.trim().parse::<u64>().ok().filter(|&s| s > 0).ok_or_else(|| arg_err!(op, "`{part}`: a stage's steps are a count above 0"))?),
                ),
                None if i + 1 == parts.len() => (*part, None),
                None => return Err(arg_err!(op, "`{part}`: every stage but the last says how many steps it lasts (`{part}:1000`)")),
            };
            let level = MaskLevel::ALL.into_iter().find(|l| l.name() == name.trim()).ok_or_else(|| arg_err!(op, "`{name}` is not token, phrase or entity"))?;
            stages.push(MaskStage { level, steps });
        }
        Ok(MaskSchedule { stages })
    }
}

impl std::fmt::Display for MaskSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|s| match s.steps {
                Some(steps) => format!("{}:{steps}", s.level.name()),
                None => s.level.name().to_string(),
            })
            .collect();
        write!(f, "{}", stages.join(","))
    }
}

impl From<MaskSchedule> for String {
    fn from(schedule: MaskSchedule) -> String {
        schedule.to_string()
    }
}

impl TryFrom<String> for MaskSchedule {
    type Error = SesameError;

    fn try_from(text: String) -> Result<MaskSchedule> {
        text.parse()
    }
}
