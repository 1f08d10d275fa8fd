//! `svc`: run the service (`svc serve`) or administer it (`svc workspace|key|user …`).

use std::process::ExitCode;

fn main() -> ExitCode {
    svc_server::cli::main()
}
