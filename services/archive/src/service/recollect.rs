//! Recall and resolution: the namespace held `FOR SHARE`, promoted notes matched and fitted to
//! the budget under a text-free receipt; a receipt resolved only as it was selected.

use super::*;

impl Service {
    /// Recall: the namespace held `FOR SHARE`; the promoted notes of exactly this namespace
    /// matched with `simple` text search, ranked, fitted whole to the character budget; a
    /// text-free receipt written. A miss is an empty selection with its receipt. The same
    /// request id again resolves its kept receipt; a different request under it refuses.
    pub async fn recall(
        &self,
        subject: &str,
        cmd: &RecallCommand,
        recheck: Recheck,
    ) -> Result<Recollection> {
        let started = std::time::Instant::now();
        let recalled = self.recall_measured(subject, cmd, recheck).await;
        super::metrics::recalled(started, &recalled);
        recalled
    }

    /// [`Service::recall`], measured by it.
    async fn recall_measured(
        &self,
        subject: &str,
        cmd: &RecallCommand,
        recheck: Recheck,
    ) -> Result<Recollection> {
        let ns = cmd.namespace.as_str();
        let query_digest = digest::query(&cmd.query);
        let request = digest::recall(&query_digest, &cmd.purpose, cmd.max_results, cmd.max_chars);
        // Re-asked once the namespace was free, never under its lock.
        self.wait_then_recheck(ns, Mode::Share, &recheck).await?;
        let mut tx = store::begin(&self.pool).await?;
        let namespace = self
            .namespace(&mut tx, ns, Mode::Share)
            .await?
            .ok_or(ArchiveError::NamespaceNotFound)?;
        if let Some(kept) = receipts::find(&mut tx, ns, &cmd.request_id).await? {
            if kept.request_digest != request {
                return Err(ArchiveError::RecallConflict);
            }
            let notes = Self::resolve_in(&mut tx, &kept).await?;
            tx.commit().await?;
            return Ok(Recollection {
                receipt: kept,
                notes,
                replayed: true,
            });
        }
        let hits = receipts::search(&mut tx, ns, &cmd.query, i64::from(cmd.max_results)).await?;
        let lengths: Vec<usize> = hits.iter().map(|h| h.note.chars.max(0) as usize).collect();
        let (kept, omitted) = recall::fit(&lengths, cmd.max_chars as usize);
        let notes: Vec<Recalled> = kept
            .iter()
            .map(|&i| {
                let h = &hits[i];
                Recalled {
                    projection: digest::projection(h.note.id, h.note.version, &h.body),
                    note: h.note.clone(),
                    text: h.body.clone(),
                    score: h.score,
                }
            })
            .collect();
        let receipt = receipts::insert(
            &mut tx,
            &ReceiptRow {
                id: Uuid::new_v4(),
                namespace: ns.to_owned(),
                request_id: cmd.request_id.clone(),
                request_digest: request.to_vec(),
                subject: subject.to_owned(),
                purpose: cmd.purpose.clone(),
                policy_revision: namespace.policy_revision,
                query_digest: query_digest.to_vec(),
                max_results: i32::try_from(cmd.max_results).unwrap_or(i32::MAX),
                max_chars: i32::try_from(cmd.max_chars).unwrap_or(i32::MAX),
                selected_ids: notes.iter().map(|n| n.note.id).collect(),
                selected_versions: notes.iter().map(|n| n.note.version).collect(),
                projection_digests: notes.iter().map(|n| n.projection.to_vec()).collect(),
                scores: notes.iter().map(|n| n.score).collect(),
                omitted_ids: omitted.iter().map(|&i| hits[i].note.id).collect(),
                created_at: OffsetDateTime::UNIX_EPOCH,
            },
        )
        .await
        .map_err(|e| {
            if lychd_runtime::refusal::is_unique_violation(&e, "recall_receipts_request_key") {
                // A concurrent recall under the same request id wrote its receipt first.
                conflict()
            } else {
                ArchiveError::Database(e)
            }
        })?;
        lychd_runtime::refusal::commit(tx).await?;
        tracing::info!(
            namespace = ns,
            selected = receipt.selected_ids.len(),
            omitted = receipt.omitted_ids.len(),
            "recalled"
        );
        Ok(Recollection {
            receipt,
            notes,
            replayed: false,
        })
    }

    /// Resolve a receipt: every selected revision must still be promoted at its selected
    /// version with its selected projection; otherwise the whole resolution is refused (never
    /// replaced). Writes nothing.
    pub async fn resolve(&self, namespace: &str, request_id: &str) -> Result<Recollection> {
        let mut tx = store::begin(&self.pool).await?;
        self.namespace(&mut tx, namespace, Mode::Share)
            .await?
            .ok_or(ArchiveError::ReceiptNotFound)?;
        let receipt = receipts::find(&mut tx, namespace, request_id)
            .await?
            .ok_or(ArchiveError::ReceiptNotFound)?;
        let notes = Self::resolve_in(&mut tx, &receipt).await?;
        tx.commit().await?;
        Ok(Recollection {
            receipt,
            notes,
            replayed: false,
        })
    }

    async fn resolve_in(tx: &mut Tx, receipt: &ReceiptRow) -> Result<Vec<Recalled>> {
        let texts: std::collections::HashMap<Uuid, String> =
            notes::texts(tx, &receipt.selected_ids)
                .await?
                .into_iter()
                .collect();
        let mut out = Vec::with_capacity(receipt.selected_ids.len());
        for (i, id) in receipt.selected_ids.iter().enumerate() {
            let note = notes::get(tx, &receipt.namespace, *id).await?;
            let current = note.as_ref().and_then(|n| {
                Some(Current {
                    revision: n.id,
                    state: State::parse(&n.state)?,
                    version: n.version,
                    superseded: n.superseded_by.is_some(),
                    projection: texts
                        .get(id)
                        .map(|t| digest::projection(n.id, n.version, t)),
                })
            });
            let version = receipt.selected_versions.get(i).copied().unwrap_or(-1);
            let projection: digest::Sha = receipt
                .projection_digests
                .get(i)
                .and_then(|p| p.as_slice().try_into().ok())
                .ok_or_else(|| broken("a receipt's projection digest is not 32 bytes"))?;
            recall::still_selected(current.as_ref(), version, &projection)
                .map_err(ArchiveError::Stale)?;
            let (Some(note), Some(text)) = (note, texts.get(id)) else {
                return Err(broken("a resolved note has no metadata or text"));
            };
            out.push(Recalled {
                note,
                text: text.clone(),
                score: receipt.scores.get(i).copied().unwrap_or_default(),
                projection,
            });
        }
        Ok(out)
    }
}
