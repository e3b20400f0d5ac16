//! One file per subcommand: what `gateway-dns serve`, `check`, `certs`, `completions` and `man`
//! do, and the generator of the flags reference. The application's edge: errors here are
//! `anyhow`.

pub mod certs;
pub mod check;
pub mod completions;
pub mod flags_doc;
pub mod man;
pub mod serve;

/// Exit codes of `check` (and `certs`, which fails with `EXIT_INPUT`).
pub const EXIT_OK: u8 = 0;
pub const EXIT_DENIED: u8 = 1;
pub const EXIT_INPUT: u8 = 2;
