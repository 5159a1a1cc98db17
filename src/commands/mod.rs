//! The commands: clients of the engine that read a whole input and report or write.

pub mod compare;
pub mod config;
pub mod dataset;
pub mod estimators;
pub mod inspect;
pub mod report;
pub mod run;
