//! Reading one input as the CLI reads it, for clients that hold its record batches in memory
//! (the Python package's `compute` on a path): what IN is, resolved as the CLI resolves it
//! ([`InputSource`]), one Parquet or Arrow IPC file opened with the CLI's checks and read by
//! row group, and the panic hook that keeps the decoder's caught panics quiet.

use std::path::Path;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::error::Result;
use crate::io::format::Format;

pub use crate::io::input_source::InputSource;

/// The trainer whose dump IN is ([`InputSource::resolve`]: `format` when it names one, else
/// told by the layout, `docs/trainers.md`); `None` for any other input, or a path that cannot
/// be resolved (its reader then reports why). Its estimator and convention are the
/// configuration's defaults ([`ConfigSources::input_defaults`](crate::ConfigSources::input_defaults),
/// from [`dump_defaults`]).
pub fn dump_trainer(path: &Path, format: Option<Format>) -> Option<crate::Trainer> {
    InputSource::resolve(path, format).ok()?.trainer()
}

/// What another trainer's dump suggests for the configuration where no source says
/// otherwise: GRPO, the algorithm every supported trainer trains with by default, under the
/// trainer's convention. The configuration writes them below every source.
pub fn dump_defaults(trainer: crate::Trainer) -> crate::config::InputDefaults {
    crate::config::InputDefaults {
        source: trainer.title(),
        adv_estimator: crate::Estimator::Grpo,
        convention: trainer.convention(),
    }
}

/// One input file, opened as `advcalc run` opens it: Parquet, or an Arrow IPC file or stream
/// (`-`: stdin) spooled into a temporary Parquet file (removed on drop), or a verl JSONL dump
/// read into one; its format from `format`, else the extension.
pub struct InputFile(crate::io::input::Input);

impl InputFile {
    /// Open IN, one file as `source` names it, with the CLI's checks and messages (which name
    /// the file). `allow_nonfinite` lets a JSONL dump's NaN and ±inf scores through
    /// (`--allow-nonfinite`); `dump` is what another trainer's dump does not record
    /// ([`DumpOptions::of`](crate::DumpOptions::of)).
    pub fn open(
        source: &InputSource,
        allow_nonfinite: bool,
        dump: &crate::DumpOptions,
    ) -> Result<InputFile> {
        crate::io::input::Input::open(source, allow_nonfinite, dump).map(InputFile)
    }

    /// Whether the input's NaN scores are its trainer's own, which `config`'s convention
    /// handles (a TRL dump's rows without a reward, under `--convention trl`): then they need
    /// no `allow_nonfinite`, as in `advcalc run`.
    pub fn own_nan_scores(&self, config: &crate::Config) -> bool {
        self.0.own_nan_scores(config)
    }

    /// What its reader says of how it read IN (another trainer's dump: the group size it
    /// inferred, the reward weights it took, the rows without a reward), as `run` prints them
    /// before the configuration's notes.
    pub fn notes(&self) -> &[String] {
        self.0.trainer.as_ref().map_or(&[], |t| t.notes.as_slice())
    }

    /// The input's name in messages (`<stdin>` for `-`).
    pub fn name(&self) -> &str {
        self.0.parquet.name()
    }

    /// The input's Arrow schema.
    pub fn schema(&self) -> SchemaRef {
        self.0.parquet.schema()
    }

    /// The number of row groups (the unit of reading, and of parallel work).
    pub fn num_row_groups(&self) -> usize {
        self.0.parquet.num_row_groups()
    }

    /// One row group, every column, with the CLI's checks (a malformed file is a data error
    /// naming it, never a panic). Row groups may be read from several threads at once.
    pub fn read_row_group(&self, index: usize) -> Result<RecordBatch> {
        self.0.parquet.read_row_group(index, None)
    }
}

/// Install a panic hook that keeps the default report of panics inside the Parquet decoder off
/// stderr (malformed input: they are caught and returned as data errors) and passes every
/// other panic to the hook installed before. [`crate::cli::main`] installs it; an embedding
/// process (the Python module) calls it once.
pub fn quiet_decoder_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !crate::io::read::decoding() {
            previous(info);
        }
    }));
}
