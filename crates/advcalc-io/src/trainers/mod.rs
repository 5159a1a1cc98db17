//! Other trainers' rollout dumps as input, read as the trainers write them: TRL's
//! `completions_NNNNN.parquet`, NeMo-RL's `train_data_stepN.jsonl`, prime-rl's
//! `rollouts/step_N/train/effective/traces.jsonl` and open-instruct's `--save_traces` shards
//! (`docs/trainers.md`; each trainer's reader is its own file here).
//!
//! Like verl's JSONL dumps (`io::jsonl`), a dump is **spooled** into a temporary Parquet file
//! that the passes read: advcalc's columns (`uid`: the group as the trainer forms it, `step`,
//! `response_mask`, `score`, the log-probs the dump holds, and [`LOGGED_ADVANTAGE`]: the
//! advantage the trainer logged for the row), then every field of the dump as a passthrough
//! column. A dump field whose name advcalc reads or writes (`advantages`, `values`, ...) is
//! kept as `trainer_NAME`, so the passes never mistake it for one of their own columns. The
//! spool's schema metadata names the trainer ([`TRAINER_KEY`]); a dump with no token data (TRL)
//! is also marked sequence-level (`io::jsonl::SEQUENCE_LEVEL_KEY`), so token-level
//! configurations are refused on it.
//!
//! `run` writes the spool's columns and advcalc's `advantages`/`returns` beside the logged
//! [`LOGGED_ADVANTAGE`]; `inspect` recomputes the advantages under the trainer's own
//! convention and reports where the logged ones differ (`commands::analysis::logged`).
//!
//! The code, one concept a file:
//!
//! - this file: the registry of trainers ([`Trainer`]: names, conventions, [`by_file_name`]),
//!   what a reader takes from the configuration ([`DumpOptions`]) and what it gives back
//!   ([`TrainerInput`]);
//! - `discovery.rs`: telling a dump by its layout ([`detect`]) and finding its files
//!   ([`find_files`]: a glob, a directory searched 5 deep, in natural order);
//! - `spool.rs`: the spool every reader writes ([`spool()`], [`SpoolWriter`], [`DumpRow`]) and
//!   the one-read spooling of a JSONL dump;
//! - `line_reader.rs`: the JSONL readers' frame ([`LineReader`], [`Line`]: lines parsed on
//!   every thread), the passthrough fields' JSON typing, and the list and field helpers;
//! - `groups.rs`: group inference ([`inferred_group_size`]);
//! - `trl.rs`, `nemo_rl.rs`, `prime_rl.rs`, `open_instruct.rs`: one reader per trainer.

mod discovery;
mod groups;
mod line_reader;
pub mod nemo_rl;
pub mod open_instruct;
pub mod prime_rl;
mod spool;
pub mod trl;

pub use discovery::{detect, find_files, number_after};
pub use groups::inferred_group_size;
pub use line_reader::{
    Line, LineReader, field_tree, float_list, int_list, refused_score, required, score_fault,
};
pub use spool::{DumpRow, LogProbColumns, SpoolWriter, passthrough_name, spool};

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::estimators::conventions::Convention;

/// Schema metadata key naming the trainer whose dump a spool holds ([`Trainer::name`]).
pub const TRAINER_KEY: &str = "advcalc:trainer_dump";

/// The spool's column of the advantage the trainer logged for each row (float64; null when
/// the dump holds none for the row).
pub const LOGGED_ADVANTAGE: &str = "trainer_advantage";

/// Rows per spooled row group.
const BATCH_ROWS: usize = 1024;

/// A trainer whose rollout dump advcalc reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trainer {
    Trl,
    NemoRl,
    PrimeRl,
    OpenInstruct,
}

impl Trainer {
    pub const ALL: [Trainer; 4] = [
        Trainer::Trl,
        Trainer::NemoRl,
        Trainer::PrimeRl,
        Trainer::OpenInstruct,
    ];

    /// The name of `--input-format` and of its convention.
    pub fn name(self) -> &'static str {
        match self {
            Trainer::Trl => "trl",
            Trainer::NemoRl => "nemo-rl",
            Trainer::PrimeRl => "prime-rl",
            Trainer::OpenInstruct => "open-instruct",
        }
    }

    /// The trainer's name as its project writes it, for messages.
    pub fn title(self) -> &'static str {
        match self {
            Trainer::Trl => "TRL",
            Trainer::NemoRl => "NeMo-RL",
            Trainer::PrimeRl => "prime-rl",
            Trainer::OpenInstruct => "open-instruct",
        }
    }

    /// "a TRL", "an open-instruct": the title with its article, for "{} dump" in messages.
    pub fn a_title(self) -> String {
        let article = if self.title().starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {}", self.title())
    }

    pub fn from_name(name: &str) -> Option<Trainer> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `--convention` whose numbers the trainer's default algorithm (GRPO) gives: the
    /// default for its dumps, and what `inspect`'s check recomputes under.
    pub fn convention(self) -> Convention {
        match self {
            Trainer::Trl => Convention::Trl,
            Trainer::NemoRl => Convention::NemoRl,
            // prime-rl's GRPO: reward − group mean in float32, no std
            Trainer::PrimeRl => Convention::PrimeRl,
            Trainer::OpenInstruct => Convention::OpenInstruct,
        }
    }

    /// Whether the dump holds one score per row and no tokens.
    pub fn sequence_level(self) -> bool {
        self == Trainer::Trl
    }

    /// Whether `file` (a file name) is one of the trainer's dump files.
    fn names_a_dump_file(self, file: &str) -> bool {
        let numbered = |s: &str, prefix: &str, suffix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        };
        match self {
            Trainer::Trl => numbered(file, "completions_", ".parquet"),
            Trainer::NemoRl => numbered(file, "train_data_step", ".jsonl"),
            Trainer::PrimeRl => file == "traces.jsonl" || file == prime_rl::OLD_FILE,
            Trainer::OpenInstruct => file
                .rsplit_once("_rollouts_")
                .is_some_and(|(run, n)| !run.is_empty() && numbered(n, "", ".jsonl")),
        }
    }

    /// The dump's files under `dir` (or `dir` itself when it is a file), in reading order.
    fn files(self, path: &Path, name: &str) -> Result<Vec<PathBuf>> {
        match self {
            Trainer::Trl => trl::files(path, name),
            Trainer::NemoRl => nemo_rl::files(path, name),
            Trainer::PrimeRl => prime_rl::files(path, name),
            Trainer::OpenInstruct => open_instruct::files(path, name),
        }
    }
}

/// What a reader needs from the configuration: what the dump itself does not record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpOptions {
    /// `algorithm.group_size`: the rows per group where the trainer forms groups of
    /// consecutive rows (TRL); `None`: inferred from the dump, and said so.
    pub group_size: Option<usize>,
    /// `algorithm.trl.reward_weights`: TRL's `reward_weights` (empty: 1.0 for every reward
    /// function, as TRL's default).
    pub reward_weights: Vec<f64>,
    /// Whether a TRL row that no reward function scored (its score NaN) is taken as TRL takes
    /// it, advantage 0: under `--convention trl`. Otherwise the reader refuses it, naming the
    /// file and the row, unless non-finite values are let through.
    pub trl_unscored_rows: bool,
}

impl DumpOptions {
    /// What the configuration says of other trainers' dumps (`algorithm.group_size`,
    /// `algorithm.trl.reward_weights`, and whether TRL's convention gives unscored rows 0).
    pub fn of(config: &crate::config::Config) -> Self {
        let ext = &config.algorithm.ext;
        DumpOptions {
            group_size: ext.group_size,
            reward_weights: ext.trl_reward_weights.clone(),
            trl_unscored_rows: ext.convention == Convention::Trl,
        }
    }
}

/// A dump as read: the trainer, its files, and what the reader assumed.
#[derive(Debug, Clone)]
pub struct TrainerInput {
    pub trainer: Trainer,
    pub files: Vec<PathBuf>,
    pub rows: usize,
    /// What the reader chose that the dump does not say (an inferred group size, default
    /// reward weights): `inspect` and `run` print them as notes.
    pub notes: Vec<String>,
    /// The size of consecutive groups the reader cut (TRL), given or inferred.
    pub group_size: Option<usize>,
    /// Each spooled row's file (index into `files`) and line, for a JSONL dump: where an
    /// error the passes raise on a row is in the user's files.
    lines: Vec<(u32, u32)>,
    /// The dump's field each spooled token column comes from (`LineReader::FIELDS`).
    fields: &'static [(&'static str, &'static str)],
}

impl TrainerInput {
    /// Where spooled row `row` came from, `FILE line N`, when the reader kept it.
    pub fn locate(&self, row: usize) -> Option<String> {
        let &(file, line) = self.lines.get(row)?;
        Some(format!(
            "{} line {line}",
            self.files.get(file as usize)?.display()
        ))
    }

    /// `e` with the user's file, line and field in front, when it is about a spooled row the
    /// reader kept the origin of (the passes name the spool's columns and rows).
    pub fn locate_error(&self, e: crate::error::Error) -> crate::error::Error {
        let Some((column, row)) = e.cell() else {
            return e;
        };
        let Some(at) = self.locate(row) else {
            return e;
        };
        match self.fields.iter().find(|(c, _)| *c == column) {
            Some((_, field)) => e.context(format!("{at}: {field}")),
            None => e.context(at),
        }
    }

    /// Whether the dump's NaN scores are the trainer's own, handled by its convention: a
    /// TRL row whose reward functions all returned None, which TRL gives advantage 0 (as
    /// `--convention trl` does). Then `run` needs no `--allow-nonfinite` for them.
    pub fn own_nan_scores(&self, convention: Convention) -> bool {
        self.trainer == Trainer::Trl && convention == Convention::Trl
    }
}

/// The trainer whose dump files are named like `file` (a file name, not a path), if any.
pub fn by_file_name(file: &str) -> Option<Trainer> {
    Trainer::ALL.into_iter().find(|t| t.names_a_dump_file(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_files_are_told_by_their_names() {
        let of = |f: &str| Trainer::ALL.into_iter().find(|t| t.names_a_dump_file(f));
        assert_eq!(of("completions_00012.parquet"), Some(Trainer::Trl));
        assert_eq!(of("completions_.parquet"), None);
        assert_eq!(of("train_data_step3.jsonl"), Some(Trainer::NemoRl));
        assert_eq!(of("val_data_step3.jsonl"), None);
        assert_eq!(of("traces.jsonl"), Some(Trainer::PrimeRl));
        assert_eq!(
            of("run1_rollouts_000000.jsonl"),
            Some(Trainer::OpenInstruct)
        );
        assert_eq!(of("run1_metadata.jsonl"), None);
        assert_eq!(of("12.jsonl"), None);
    }
}
