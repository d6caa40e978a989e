//! Ward's bootstrap and enrollment for the dev stack, through the same code as
//! `lychd provision bootstrap` and `lychd provision enroll` ([`crate::provision`]): the first
//! operator's credential file, every office's principal, grants and credential file; and the
//! operator's per-office sessions the printed examples use.

use anyhow::Context;
use lychd_auth::admin::Session;
use lychd_runtime::Office;
use tonic::transport::Channel;

use super::configuration::{Layout, OPERATOR_SESSION};
use super::supervision::Supervised;
use crate::provision::{enroll, secrets, ward};

/// On a first start (no operator credential yet), Ward's `bootstrap`: the first operator, whose
/// standing credential goes to the operator credential file.
pub(super) async fn bootstrap_ward(wardp: &Supervised, layout: &Layout) -> anyhow::Result<()> {
    let created = ward::bootstrap(wardp.binary(), wardp.config(), &layout.operator_credential)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "{e:#} (a persisted stack whose {} was lost cannot be recovered: remove {} to start over)",
                layout.operator_credential.display(),
                layout.pg.display()
            )
        })?;
    if created {
        println!(
            "ward bootstrapped: operator credential in {} (mode {:04o})",
            layout.operator_credential.display(),
            secrets::SECRET_MODE
        );
    }
    Ok(())
}

/// Exchange the operator's standing credential for one session of [`OPERATOR_SESSION`] per
/// office, each bound to that office alone and written to its token file; returns Ward's.
pub(super) async fn operator_session(ward: Channel, layout: &Layout) -> anyhow::Result<Session> {
    let credential = secrets::read(&layout.operator_credential)?;
    let ttl_seconds = u32::try_from(OPERATOR_SESSION.as_secs()).unwrap_or(u32::MAX);
    let mut ward_session = None;
    for office in Office::ALL {
        let session =
            lychd_auth::admin::exchange(ward.clone(), &credential, ttl_seconds, &[office.name()])
                .await
                .with_context(|| format!("operator session for {office} from ward"))?;
        secrets::write_secret(&layout.operator_token(office), &session.token)?;
        if office == Office::Ward {
            ward_session = Some(session);
        }
    }
    ward_session.context("invariant: ward is an office")
}

/// The operator's assignments and every office's principal, grants and credential file
/// (`lychd provision enroll`'s code).
pub(super) async fn enrol(ward: Channel, layout: &Layout) -> anyhow::Result<()> {
    let credential = secrets::read(&layout.operator_credential)?;
    enroll::enroll(ward, &credential, |office| layout.credential(office)).await?;
    Ok(())
}
