//! Command-line arguments (clap derive). Parsed once in [`super::main`] into a validated
//! [`Config`] and [`RunOptions`]; nothing below looks at argv.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands::check::{CheckOptions, likely_alternatives};
use crate::commands::compare::{CompareOptions, Variant};
use crate::commands::inspect::InspectOptions;
use crate::commands::report::ReportOptions;
use crate::commands::view::ViewOptions;
use crate::config::{Config, ConfigSources};
use crate::error::{Error, Result};
use crate::io::format::Format;
use crate::io::trainers::Trainer;
use crate::shaping::scores::Layout;
use advcalc_commands::run::{DatasetOptions, RunOptions};

#[derive(Debug, Parser)]
#[command(
    name = "advcalc",
    version,
    about = "Advantages and returns for logged LLM RL rollouts, with verl 0.9.1's numbers",
    long_about = "advcalc reads rollout dumps (Parquet or Arrow IPC, one row per response: uid, \
response_mask, rm_scores, ...), applies KL shaping, rollout correction and the configured \
advantage estimator exactly as verl 0.9.1's trainer would, and writes token_level_rewards, \
advantages and returns back out. It also reads verl's own JSONL dumps (trainer.rollout_data_dir: \
one score per row), for the sequence-level estimators (GRPO/RLOO family), `inspect` and \
`compare`.\n\nExamples:\n  advcalc run -e grpo in.parquet out.parquet\n  \
advcalc inspect rollout_data_dir/\n  advcalc run -e grpo rollout_data_dir/ advantages.parquet\n  \
advcalc run -e grpo dumps/ adv/   (a dataset: a directory of step=N.parquet files)\n  \
advcalc run --config verl_trainer.yaml --metrics metrics.json in.parquet out.parquet\n  \
cat in.arrows | advcalc run -q -e rloo - - | next-step\n  advcalc inspect in.parquet\n  \
advcalc compare -e grpo,rloo,drgrpo in.parquet\n  \
advcalc report -e grpo,rloo,drgrpo in.parquet -o report.html\n  \
advcalc view -e grpo,rloo dumps/\n  \
advcalc check -c verl_trainer.yaml run.jsonl dumps/\n  \
advcalc config -c verl_trainer.yaml --origins\n  advcalc estimators\n  advcalc losses"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compute advantages and returns for a rollout dump
    Run(Box<RunArgs>),
    /// Check a rollout dump before blaming the optimiser
    ///
    /// Per step: masks and tool spans, group sizes, groups with no learning signal, score
    /// sums, the KL term, train/rollout mismatch, non-finite values, positive log-probs and,
    /// with -e, advantage statistics; likely mistakes are flagged as warnings.
    Inspect(Box<InspectArgs>),
    /// Compare several estimators (or configs) on one dump, side by side
    ///
    /// Advantage statistics per variant, weight by group pass rate and on correct vs
    /// incorrect rows, sign agreement and rank correlation per pair; writes no output file.
    Compare(Box<CompareArgs>),
    /// Write one self-contained HTML page of plots about a dump
    ///
    /// The inspect findings, per-step curves, advantage distributions per estimator, the
    /// difficulty-bias curve, token strips of a few rows, the rollout correction and the
    /// loss weights by response length, from the same passes as inspect, compare and loss;
    /// opens offline in any browser and prints.
    Report(Box<ReportArgs>),
    /// Browse a dump in a local web app: steps, groups, rows, every token
    ///
    /// The overview's per-step curves and inspect findings, a step's groups, a group's rows
    /// with each estimator's advantages, and a row's tokens coloured by advantage, gradient
    /// weight, IS weight, rejection, KL or entropy; --follow shows steps as they land.
    /// Listens on 127.0.0.1 with a token in the URL.
    View(Box<ViewArgs>),
    /// Check a run's logged metrics against the same metrics recomputed from its dumps
    ///
    /// Per step: each metric the log holds that advcalc recomputes from the step's dumps
    /// (verl's critic/score, critic/rewards, critic/advantages, critic/returns,
    /// critic/values, response_length, num_turns; TRL's reward, reward_std,
    /// frac_reward_zero_std), logged against recomputed, with the first divergence and its
    /// likely cause; what it cannot recompute is listed, not skipped.
    Check(Box<CheckArgs>),
    /// Replay verl's actor loss on a dump: per-token losses and gradient weights
    ///
    /// verl 0.9.1's policy loss (every loss_mode but the random clip_cov), loss_agg_mode and
    /// KL loss, per mini-batch as verl's engine cuts the steps, from the advantages in IN (or
    /// computed first as `run` does); OUT is IN with pg_losses, grad_weights (dL/d log π)
    /// and kl_losses. docs/loss.md explains the assumptions and how to read the numbers.
    Loss(Box<LossArgs>),
    /// Print the resolved configuration advcalc will run with
    ///
    /// The verl config (its algorithm: section and actor_rollout_ref.rollout.n) as OmegaConf
    /// resolves it (interpolations, YAML 1.1 scalars), with --set and the flags applied over
    /// verl's defaults, validated as `run` validates it.
    Config(Box<ConfigArgs>),
    /// List every estimator: what it computes, the columns it needs, the settings it reads
    Estimators {
        /// Print JSON (an array of objects) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// List every policy loss `advcalc loss` replays: what it computes, its metrics, the keys it reads
    ///
    /// verl 0.9.1's policy_loss.loss_mode values (every registered one but the random
    /// clip_cov), with bypass mode's two losses (algorithm.rollout_correction.loss_type
    /// ppo_clip and reinforce): where verl defines each, whether it works per token or per
    /// row, which of pg_clipfrac, pg_clipfrac_lower and ppo_kl it returns, and the
    /// configuration keys it reads.
    Losses {
        /// Print JSON (an array of objects) instead of a table
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    /// Output, formats as IN (`-`: an Arrow IPC stream on stdout); a file is written to a
    /// temporary file beside it, then renamed. From a JSONL dump: its fields and one
    /// `advantage` per row, as Parquet or Arrow. From a dataset: a directory (created if
    /// missing) with one output per input file, under the same relative path. With the
    /// `cloud` feature, an object URL (a prefix for a dataset), put whole once complete and
    /// create-only unless --force
    #[arg(value_name = "OUT")]
    pub output: PathBuf,

    /// Format of OUT, instead of guessing from its extension
    #[arg(long, value_name = "FORMAT", value_parser = output_formats())]
    pub output_format: Option<FormatArg>,

    /// Advantage estimator (verl's algorithm.adv_estimator; verl's default is gae)
    #[arg(short = 'e', long, value_name = "NAME")]
    pub estimator: Option<String>,

    /// verl trainer YAML (its `algorithm:` section is read) or a file holding that section
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub algo: AlgoArgs,

    /// Write verl's metrics (actor/reward_kl_penalty, rollout_corr/...) and advcalc's own as
    /// JSON: one object, or one object per step when the input has a `step` column. Under
    /// OUT's rules: never IN or OUT, an existing file replaced only with --force; `-` writes
    /// to stdout
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// Let NaN and ±inf in rewards, log-probs and values through (verl's behaviour) instead
    /// of refusing them
    #[arg(long)]
    pub allow_nonfinite: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// Memory for the decoded row groups kept between the passes (K, M, G or T: 1024-based;
    /// plain digits: bytes). Within it pass 2 reuses what pass 1 decoded; beyond it the rest
    /// is read again. The output is the same for any budget; 0 reads everything twice
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_memory)]
    pub memory: usize,

    /// Print nothing but errors (no progress bar, no notes)
    #[arg(short, long)]
    pub quiet: bool,

    /// Overwrite OUT if it exists (a dataset: redo every file)
    #[arg(short, long)]
    pub force: bool,

    /// Dataset (IN a directory or glob): finish an interrupted run, keeping each output file
    /// that this configuration already wrote from the same input, redoing the rest; outputs
    /// of another configuration are refused
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  advcalc loss -c outputs/run/.hydra/config.yaml dump.parquet out.parquet --metrics m.json\n  \
advcalc loss -c ppo.yaml --set actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean in.parquet out.parquet\n  \
advcalc loss -c ppo.yaml --json in.parquet out.parquet | jq .modes\n\n\
IN's advantages are replayed when it has an advantages column; otherwise they are computed \
first, as `run` computes them. Without a log_probs column the replay is on-policy (ratio 1). \
docs/loss.md explains the mini-batch assumptions and how to read the length-bias table.",
    mut_arg("config", |a| a.help("verl trainer YAML: its `algorithm:` section, `actor_rollout_ref.actor` (policy_loss, loss_agg_mode, clip ratios, the KL loss, mini- and micro-batch sizes) and `actor_rollout_ref.rollout.n` are read")),
    mut_arg("metrics", |a| a.help("Write what verl's trainer logs for each step under verl's names (actor/pg_loss, actor/pg_clipfrac, actor/ppo_kl, actor/kl_loss, actor/loss), advcalc's advcalc/loss/... figures and run's metrics, as JSON: one object, or one per step when IN has a `step` column. Under OUT's rules: never IN or OUT, an existing file replaced only with --force; `-` writes to stdout"))
)]
pub struct LossArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Print the length-bias view (how each loss_agg_mode weighs this dump) as JSON on
    /// stdout instead of a table on stderr
    #[arg(long)]
    pub json: bool,
}

/// IN and how to read it: what every subcommand takes.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Input: Parquet, an Arrow IPC file (.arrow/.feather/.ipc) or stream (.arrows), `-` for
    /// an Arrow IPC stream on stdin, verl's JSONL dumps (a .jsonl file, or the
    /// rollout_data_dir holding them: one score per row, sequence-level estimators only),
    /// another trainer's dump (TRL's completions_NNNNN.parquet, NeMo-RL's
    /// train_data_stepN.jsonl, prime-rl's rollouts/, open-instruct's RUN_rollouts_NNNNNN.jsonl:
    /// a file, the run's directory or a glob; docs/trainers.md), or a dataset: a directory or
    /// a quoted glob ('dumps/step=*.parquet') of Parquet/Arrow files, read as one input (steps
    /// from a `step` column, or step=N in the paths). Built with the `cloud` feature, an object
    /// URL too: s3://, gs://, az://, https:// (an object, a prefix/ or a glob under one;
    /// docs/object-storage.md)
    #[arg(value_name = "IN")]
    pub input: PathBuf,

    /// Format of IN, instead of guessing from its extension
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<FormatArg>,

    /// Token list layout; decides where a scalar `score` column is placed
    #[arg(long, value_enum, default_value_t = LayoutArg::Ragged)]
    pub layout: LayoutArg,
}

impl ReadArgs {
    /// The trainer whose dump IN is, when it is one (told by `--input-format` or the layout);
    /// a layout that cannot be read is left to the reader's own error.
    pub fn dump(&self) -> Option<Trainer> {
        crate::input::dump_trainer(&self.input, self.input_format.map(Format::from))
    }
}

/// The algorithm settings every subcommand that computes advantages accepts.
#[derive(Debug, Args)]
pub struct AlgoArgs {
    /// Override a config key, e.g. --set algorithm.norm_adv_by_std_in_grpo=false (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,

    /// Discount factor (algorithm.gamma)
    #[arg(long, value_name = "X")]
    pub gamma: Option<f64>,

    /// GAE lambda (algorithm.lam)
    #[arg(long, value_name = "X")]
    pub lam: Option<f64>,

    /// GRPO without dividing by the group std (algorithm.norm_adv_by_std_in_grpo=false)
    #[arg(long)]
    pub no_norm_adv_by_std: bool,

    /// Whose numbers the GRPO/RLOO family (grpo, drgrpo, grpo_batch_std, rloo, maxrl) gives:
    /// verl, trl, openrlhf, nemo-rl, open-instruct, skyrl or prime-rl (algorithm.convention;
    /// default verl, or the trainer's for another trainer's dump)
    #[arg(long, value_name = "NAME")]
    pub convention: Option<String>,
}

/// The config file's name and text, read through the I/O layer (a local file or, with the
/// `cloud` feature, an object URL).
pub fn config_text(file: Option<&std::path::Path>) -> Result<Option<(String, String)>> {
    file.map(|path| {
        let text = crate::io::whole_file::read_to_string(path, "config file")?;
        Ok((path.display().to_string(), text))
    })
    .transpose()
}

impl AlgoArgs {
    /// Load the configuration: `file`, then `--set`, then the flags (docs/config.md), reading the
    /// actor section too when `actor` (`advcalc loss`). For IN another trainer's `dump`, its
    /// estimator and convention are the defaults no source overrode.
    pub fn load(
        &self,
        file: Option<&std::path::Path>,
        estimator: Option<&str>,
        actor: bool,
        dump: Option<Trainer>,
    ) -> Result<Config> {
        let text = config_text(file)?;
        Config::load(&ConfigSources {
            input_defaults: dump.map(crate::input::dump_defaults),
            actor,
            file: None,
            text: text
                .as_ref()
                .map(|(name, text)| (name.as_str(), text.as_str())),
            sets: &self.sets,
            estimator,
            gamma: self.gamma,
            lam: self.lam,
            no_norm_adv_by_std: self.no_norm_adv_by_std,
            convention: self.convention.as_deref(),
        })
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  advcalc config -c outputs/run/.hydra/config.yaml\n  \
advcalc config -c verl_trainer.yaml --set algorithm.gamma=0.99 --origins\n  \
advcalc config -e grpo --json\n\n\
Interpolations (${a.b}, ${.x}, ${oc.env:VAR,default}, oc.decode, oc.select) are resolved and \
plain scalars read as YAML 1.1 (yes/no/on/off are booleans), as verl's OmegaConf reads them; \
docs/config.md has the details."
)]
pub struct ConfigArgs {
    /// verl trainer YAML (its `algorithm:` section is read) or a file holding that section
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Advantage estimator (verl's algorithm.adv_estimator; verl's default is gae)
    #[arg(short = 'e', long, value_name = "NAME")]
    pub estimator: Option<String>,

    #[command(flatten)]
    pub algo: AlgoArgs,

    /// Print JSON instead of YAML (non-finite floats as ".inf", "-.inf", ".nan")
    #[arg(long)]
    pub json: bool,

    /// Show where each value came from: default, file, --set or a flag (and the
    /// interpolation it was resolved from)
    #[arg(long)]
    pub origins: bool,

    /// Also the actor section `advcalc loss` reads (actor_rollout_ref.actor, rollout.n and
    /// rollout.response_length), validated as `loss` validates it
    #[arg(long)]
    pub actor: bool,
}

impl ConfigArgs {
    /// The sources, as `run` would merge them.
    /// The sources, with the config file's text read (`config_text`).
    pub fn sources<'a>(&'a self, text: &'a Option<(String, String)>) -> ConfigSources<'a> {
        ConfigSources {
            actor: self.actor,
            file: None,
            text: text
                .as_ref()
                .map(|(name, text)| (name.as_str(), text.as_str())),
            sets: &self.algo.sets,
            estimator: self.estimator.as_deref(),
            gamma: self.algo.gamma,
            lam: self.algo.lam,
            no_norm_adv_by_std: self.algo.no_norm_adv_by_std,
            convention: self.algo.convention.as_deref(),
            input_defaults: None,
        }
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  advcalc inspect in.parquet\n  \
advcalc inspect -c verl_trainer.yaml --json in.parquet\n  \
advcalc inspect --deny-warnings in.parquet && advcalc run -e grpo in.parquet out.parquet\n\n\
docs/inspect.md explains each finding and what to do about it.")]
pub struct InspectArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    /// Also check the advantages this estimator gives (and its KL shaping and rollout
    /// correction from --config)
    #[arg(short = 'e', long, value_name = "NAME")]
    pub estimator: Option<String>,

    /// verl trainer YAML whose `algorithm:` section (KL coefficient, rollout correction,
    /// estimator), `actor_rollout_ref.rollout.n` (the expected group size) and
    /// `actor_rollout_ref.actor` (the loss checks: loss_agg_mode and the policy loss) the checks use
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub algo: AlgoArgs,

    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,

    /// Exit with status 1 when any warning is raised (for pipelines)
    #[arg(long)]
    pub deny_warnings: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// No progress bar
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  advcalc compare -e grpo,rloo,drgrpo,reinforce_plus_plus in.parquet\n  \
advcalc compare -c run_a.yaml -c run_b.yaml --json in.parquet\n\n\
Statistics are over valid tokens (mask after rejection); docs/compare.md explains each."
)]
pub struct CompareArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub variants: VariantArgs,

    /// Let NaN and ±inf in rewards, log-probs and values through instead of refusing them
    #[arg(long)]
    pub allow_nonfinite: bool,

    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// No progress bar, no notes
    #[arg(short, long)]
    pub quiet: bool,
}

/// What `compare` and `report` set side by side: one variant per (config, estimator).
#[derive(Debug, Args)]
pub struct VariantArgs {
    /// Estimators, comma-separated (e.g. grpo,rloo,drgrpo): one variant each
    #[arg(
        short = 'e',
        long = "estimators",
        visible_alias = "estimator",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub estimators: Vec<String>,

    /// verl trainer YAML (or `algorithm:` section); repeat for more variants (each config
    /// is run with each of --estimators, or with its own estimator without -e)
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Vec<PathBuf>,

    #[command(flatten)]
    pub algo: AlgoArgs,

    /// A row is correct when its score (the sum of its token scores) is above this
    #[arg(
        long,
        value_name = "X",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub correct_above: f64,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  advcalc report -e grpo,rloo,drgrpo in.parquet -o report.html\n  \
advcalc report -c run_a.yaml -c run_b.yaml --rows 17,42 dumps/ -o report.html\n\n\
The inspect findings use the first variant's configuration.\n\
docs/report.md explains each section and how to read it."
)]
pub struct ReportArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    /// The HTML file to write (a temporary file beside it, renamed when complete)
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,

    #[command(flatten)]
    pub variants: VariantArgs,

    /// Also draw these rows (0-based, in input order, comma-separated) as token strips
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub rows: Vec<usize>,

    /// Let NaN and ±inf in rewards, log-probs and values through instead of refusing them
    #[arg(long)]
    pub allow_nonfinite: bool,

    /// Overwrite the output if it exists
    #[arg(short, long)]
    pub force: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// No progress bar, no notes
    #[arg(short, long)]
    pub quiet: bool,
}

impl ReportArgs {
    /// Validate the arguments into the variants to show and the report options.
    pub fn resolve(&self, progress: bool) -> Result<(Vec<Variant>, ReportOptions)> {
        let dump = self.read.dump();
        let mut variants = self.variants.resolve(dump)?;
        if let Some(v) = variants.first_mut() {
            note_threads(self.threads, &mut v.config.notes);
        }
        let options = ReportOptions {
            read: compare_options(
                &self.read,
                &self.variants,
                self.threads,
                self.allow_nonfinite,
                progress && !self.quiet,
            ),
            rows: self.rows.clone(),
            output: self.output.clone(),
            force: self.force,
            // the first variant's configuration with the actor section: the loss section
            loss: self
                .variants
                .algo
                .load(
                    self.variants.config.first().map(PathBuf::as_path),
                    self.variants.estimators.first().map(String::as_str),
                    true,
                    dump,
                )
                .map_err(|e| e.to_string()),
        };
        Ok((variants, options))
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  advcalc view -e grpo,rloo in.parquet\n  \
advcalc view -c verl_trainer.yaml --follow rollout_data_dir/\n  \
advcalc view --tokenizer tokenizer.json --port 6007 dumps/\n\n\
Prints the URL to open (with its token) and serves until Ctrl-C. docs/view.md explains \
each view and the security model.")]
pub struct ViewArgs {
    #[command(flatten)]
    pub read: ReadArgs,

    #[command(flatten)]
    pub variants: VariantArgs,

    /// Watch IN (a directory of steps) and show steps as they land, without a reload
    #[arg(long)]
    pub follow: bool,

    /// A Hugging Face tokenizer.json: show the dump's token ids as text
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,

    /// The run's log (as `advcalc check` reads it): logged against recomputed on the overview
    #[arg(long, value_name = "LOG")]
    pub log: Option<PathBuf>,

    /// verl's data.max_response_length, for the log check's response_length/clip_ratio
    #[arg(long, value_name = "N", requires = "log")]
    pub max_response_length: Option<usize>,

    /// The address to listen on; anything but a loopback address serves the rollouts to
    /// the network (the token still guards them)
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,

    /// The port to listen on [default: any free one]
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub port: u16,

    /// Let NaN and ±inf in rewards, log-probs and values through instead of refusing them
    #[arg(long)]
    pub allow_nonfinite: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// No notes
    #[arg(short, long)]
    pub quiet: bool,
}

impl ViewArgs {
    /// Validate the arguments into the variants to show and the view's options.
    pub fn resolve(&self) -> Result<(Vec<Variant>, ViewOptions)> {
        let dump = self.read.dump();
        let mut variants = self.variants.resolve(dump)?;
        if let Some(v) = variants.first_mut() {
            note_threads(self.threads, &mut v.config.notes);
        }
        let options = ViewOptions {
            read: compare_options(
                &self.read,
                &self.variants,
                self.threads,
                self.allow_nonfinite,
                false,
            ),
            // the first variant's configuration with the actor section: gradient weights
            loss: self
                .variants
                .algo
                .load(
                    self.variants.config.first().map(PathBuf::as_path),
                    self.variants.estimators.first().map(String::as_str),
                    true,
                    dump,
                )
                .map_err(|e| e.to_string()),
            host: self.host,
            port: self.port,
            follow: self.follow,
            tokenizer: self.tokenizer.clone(),
            log: self.log.clone(),
            max_response_length: match self.max_response_length {
                Some(n) => Some(n),
                None => max_response_length(self.variants.config.first().map(PathBuf::as_path))?,
            },
        };
        Ok((variants, options))
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  advcalc check -c verl_trainer.yaml run.jsonl rollout_data_dir/\n  \
advcalc check -c verl_trainer.yaml tensorboard_log/proj/exp dumps/ --json\n  \
advcalc check -e grpo console.log dumps/ --max-response-length 1024\n\n\
LOG: verl's file logger (JSON lines), its console output, a TensorBoard log directory or \
event file, or TRL's trainer_state.json (or its output directory). Exit 1 when a logged \
value differs from the recomputed one. docs/check.md explains each metric and tolerance."
)]
pub struct CheckArgs {
    /// The run's log (see below)
    #[arg(value_name = "LOG")]
    pub log: PathBuf,

    /// The same run's dumps: what `run` reads (a directory of steps, verl's JSONL dumps,
    /// another trainer's dump directory)
    #[command(flatten)]
    pub read: ReadArgs,

    /// Estimator (the config's own, or verl's default grpo, without it)
    #[arg(short = 'e', long = "estimator", value_name = "NAME")]
    pub estimator: Option<String>,

    /// verl trainer YAML (or `algorithm:` section) the run used
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub algo: AlgoArgs,

    /// verl's data.max_response_length, for response_length/clip_ratio
    #[arg(long, value_name = "N")]
    pub max_response_length: Option<usize>,

    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,

    /// Let NaN and ±inf in rewards, log-probs and values through instead of refusing them
    #[arg(long)]
    pub allow_nonfinite: bool,

    /// Worker threads [default: one per core]
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,

    /// No progress bar, no notes
    #[arg(short, long)]
    pub quiet: bool,
}

/// verl's `data.max_response_length` from the trainer YAML, when it holds an integer there.
fn max_response_length(file: Option<&std::path::Path>) -> Result<Option<usize>> {
    let Some((_, text)) = config_text(file)? else {
        return Ok(None);
    };
    let Ok(doc) = advcalc_config::yaml11::parse(&text) else {
        return Ok(None); // the configuration's own reading reports a bad file
    };
    Ok(match doc.at(&["data", "max_response_length"]) {
        Some(advcalc_config::Value::Int(n)) => usize::try_from(*n).ok(),
        _ => None,
    })
}

impl CheckArgs {
    /// Validate the arguments into the run's variant and the check's options; the
    /// alternatives tried when advantages diverge (the other norm_adv_by_std_in_grpo).
    pub fn resolve(&self, progress: bool) -> Result<(Variant, CheckOptions)> {
        let dump = self.read.dump();
        let config = self.algo.load(
            self.config.as_deref(),
            self.estimator.as_deref(),
            false,
            dump,
        )?;
        let label = config.algorithm.adv_estimator.name().to_string();
        let variant = Variant { label, config };
        let options = CheckOptions {
            log: self.log.clone(),
            read: CompareOptions {
                input: self.read.input.clone(),
                input_format: self.read.input_format.map(Format::from),
                layout: self.read.layout.into(),
                threads: self.threads.map(usize::from),
                progress: progress && !self.quiet,
                allow_nonfinite: self.allow_nonfinite,
                correct_above: 0.0,
            },
            max_response_length: match self.max_response_length {
                Some(n) => Some(n),
                None => max_response_length(self.config.as_deref())?,
            },
            alternatives: likely_alternatives(&variant),
        };
        Ok((variant, options))
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// Apache Parquet
    Parquet,
    /// Arrow IPC file format (.arrow, .feather, .ipc)
    Arrow,
    /// Arrow IPC stream format (.arrows, pipes)
    Arrows,
    /// verl's JSONL dumps (.jsonl, or a directory of them; input only)
    Jsonl,
    /// TRL's completions_NNNNN.parquet (log_completions; input only)
    Trl,
    /// NeMo-RL's train_data_stepN.jsonl (input only)
    NemoRl,
    /// prime-rl's rollouts/step_N/train/effective/traces.jsonl (input only)
    PrimeRl,
    /// open-instruct's --save_traces shards (RUN_rollouts_NNNNNN.jsonl; input only)
    OpenInstruct,
}

/// `--output-format`'s values: [`FormatArg`]'s, the input-only ones hidden from the help
/// (still parsed, so that OUT named as a trainer's dump gets `run`'s message why not).
fn output_formats() -> impl clap::builder::TypedValueParser<Value = FormatArg> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let values = FormatArg::value_variants().iter().filter_map(|f| {
        let value = f.to_possible_value()?;
        let writable = matches!(
            Format::from(*f),
            Format::Parquet | Format::ArrowFile | Format::ArrowStream
        );
        Some(value.hide(!writable))
    });
    PossibleValuesParser::new(values)
        .map(|name| FormatArg::from_str(&name, false).expect("one of FormatArg's names"))
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Parquet => Format::Parquet,
            FormatArg::Arrow => Format::ArrowFile,
            FormatArg::Arrows => Format::ArrowStream,
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::Trl => Format::Trainer(Trainer::Trl),
            FormatArg::NemoRl => Format::Trainer(Trainer::NemoRl),
            FormatArg::PrimeRl => Format::Trainer(Trainer::PrimeRl),
            FormatArg::OpenInstruct => Format::Trainer(Trainer::OpenInstruct),
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LayoutArg {
    /// Each list as long as the row's response; a scalar score goes on the last position
    Ragged,
    /// All lists padded to one length; a scalar score goes on the last mask-1 position
    Padded,
}

impl InspectArgs {
    /// Validate the arguments into the configuration and inspect options.
    pub fn resolve(&self, progress: bool) -> Result<(Config, InspectOptions)> {
        let file = self.config.as_deref();
        let estimator = self.estimator.as_deref();
        // the actor section too, for what `advcalc loss` would flag; one it cannot read
        // costs those checks only
        let dump = self.read.dump();
        let config = match self.algo.load(file, estimator, true, dump) {
            Ok(config) => config,
            Err(e) => {
                let mut config = self.algo.load(file, estimator, false, dump)?;
                config.notes.push(format!(
                    "the loss checks are skipped: the actor section cannot be read ({e})"
                ));
                config
            }
        };
        let mut config = config;
        note_threads(self.threads, &mut config.notes);
        let options = InspectOptions {
            input: self.read.input.clone(),
            input_format: self.read.input_format.map(Format::from),
            layout: self.read.layout.into(),
            threads: self.threads.map(usize::from),
            progress: progress && !self.quiet,
            estimator_given: self.estimator.is_some() || config.estimator_configured,
        };
        Ok((config, options))
    }
}

impl CompareArgs {
    /// Validate the arguments into the variants to compare and the compare options.
    pub fn resolve(&self, progress: bool) -> Result<(Vec<Variant>, CompareOptions)> {
        let mut variants = self.variants.resolve(self.read.dump())?;
        if let Some(v) = variants.first_mut() {
            note_threads(self.threads, &mut v.config.notes);
        }
        if variants.len() < 2 {
            return Err(Error::usage("compare needs at least two variants")
                .with_hint("name several estimators (-e grpo,rloo) or give --config twice"));
        }
        let options = compare_options(
            &self.read,
            &self.variants,
            self.threads,
            self.allow_nonfinite,
            progress && !self.quiet,
        );
        Ok((variants, options))
    }
}

/// `-j`'s note when it asks for more threads than the pool starts (`thread_count`).
fn note_threads(threads: Option<u16>, notes: &mut Vec<String>) {
    if let (_, Some(note)) = crate::thread_count(threads.map(usize::from)) {
        notes.push(format!("-j: {note}"));
    }
}

/// What `compare`'s and `report`'s passes read, and how.
fn compare_options(
    read: &ReadArgs,
    variants: &VariantArgs,
    threads: Option<u16>,
    allow_nonfinite: bool,
    progress: bool,
) -> CompareOptions {
    CompareOptions {
        input: read.input.clone(),
        input_format: read.input_format.map(Format::from),
        layout: read.layout.into(),
        threads: threads.map(usize::from),
        progress,
        allow_nonfinite,
        correct_above: variants.correct_above,
    }
}

impl VariantArgs {
    /// One variant per (config, estimator), labelled by the estimator, the config's stem, or
    /// `stem:estimator` when both vary; a label given twice is refused.
    fn resolve(&self, dump: Option<Trainer>) -> Result<Vec<Variant>> {
        let configs: Vec<Option<&std::path::Path>> = if self.config.is_empty() {
            vec![None]
        } else {
            self.config.iter().map(|c| Some(c.as_path())).collect()
        };
        let estimators: Vec<Option<&str>> = if self.estimators.is_empty() {
            vec![None]
        } else {
            self.estimators.iter().map(|e| Some(e.as_str())).collect()
        };
        let mut variants = Vec::new();
        for file in &configs {
            for estimator in &estimators {
                let config = self.algo.load(*file, *estimator, false, dump)?;
                let name = config.algorithm.adv_estimator.name();
                let label = match file {
                    Some(f) if configs.len() > 1 => {
                        let stem = f.file_stem().unwrap_or_default().to_string_lossy();
                        if estimators.len() > 1 {
                            format!("{stem}:{name}")
                        } else {
                            stem.into_owned()
                        }
                    }
                    _ => name.to_string(),
                };
                variants.push(Variant { label, config });
            }
        }
        for (i, v) in variants.iter().enumerate() {
            if variants[..i].iter().any(|w| w.label == v.label) {
                return Err(
                    Error::usage(format!("variant `{}` is given twice", v.label))
                        .with_hint("name each estimator or config once"),
                );
            }
        }
        Ok(variants)
    }
}

impl From<LayoutArg> for Layout {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Ragged => Layout::Ragged,
            LayoutArg::Padded => Layout::Padded,
        }
    }
}

impl RunArgs {
    /// Validate the arguments into the configuration and run options the library trusts
    /// (with the actor section when `loss`).
    pub fn resolve(
        &self,
        progress: bool,
        loss: bool,
    ) -> Result<(Config, RunOptions, DatasetOptions)> {
        let mut config = self.algo.load(
            self.config.as_deref(),
            self.estimator.as_deref(),
            loss,
            self.read.dump(),
        )?;
        note_threads(self.threads, &mut config.notes);
        let options = RunOptions {
            input: self.read.input.clone(),
            output: self.output.clone(),
            force: self.force,
            threads: self.threads.map(usize::from),
            progress: progress && !self.quiet,
            metrics: self.metrics.clone(),
            input_format: self.read.input_format.map(Format::from),
            output_format: self.output_format.map(Format::from),
            allow_nonfinite: self.allow_nonfinite,
            layout: self.read.layout.into(),
            memory: Some(self.memory),
        };
        let dataset = DatasetOptions {
            resume: self.resume,
        };
        Ok((config, options, dataset))
    }
}

/// `--memory`: a size in bytes, with an optional 1024-based unit: `512M`, `2G`, `1.5GiB`,
/// `4096`. Case-insensitive; the unit may end in `B` or `iB`.
fn parse_memory(text: &str) -> std::result::Result<usize, String> {
    let bad = || format!("`{text}` is not a size (examples: 0, 512M, 2G, 1.5GiB)");
    let t = text.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (number, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let number = number.trim();
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = (value * (1u64 << shift) as f64).floor();
    if !bytes.is_finite() || bytes > usize::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("0"), Ok(0));
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert_eq!(parse_memory("1k"), Ok(1024));
        assert_eq!(parse_memory("512M"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_memory("2G"), Ok(2 << 30));
        assert_eq!(parse_memory("2gb"), Ok(2 << 30));
        assert_eq!(parse_memory("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_memory("1T"), Ok(1 << 40));
        for bad in ["", "G", "-1G", "1.2.3M", "lots", "1X", "1e3"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }
}
