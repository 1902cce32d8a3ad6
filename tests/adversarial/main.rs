//! Issue 22's adversarial bash corpus, judged in a throwaway world
//! (`world.rs`) whose home is exported as `HOME`: apart from the other
//! tests, since `HOME` is process-wide.
//!
//! One test binary for the files of `tests/adversarial/` (each a module, its
//! tests named `<file>::<test>`): one link of the crate and its
//! dependencies instead of one per file.

mod world;

mod bash_adversarial;
mod bash_ground_truth;
mod bash_never_allows;
