//! `gateway-dns certs`: a CA and a serving certificate for the webhook's Service, written to a
//! directory.

use super::{EXIT_INPUT, EXIT_OK};
use crate::cli::CertsArgs;
use crate::webhook::certs;

/// Runs `certs`; returns the process exit code.
pub fn run(args: &CertsArgs) -> u8 {
    match certs::run(
        &args.service_name,
        &args.service_namespace,
        &args.out,
        args.force,
    ) {
        Ok(written) => {
            for path in written {
                println!("wrote {}", path.display());
            }
            EXIT_OK
        }
        Err(err) => {
            eprintln!("gateway-dns certs: {}", super::error_chain(&err));
            EXIT_INPUT
        }
    }
}
