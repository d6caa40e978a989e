//! Stored evaluations, keyed by input digest. The input digest commits the context and every
//! distinct record body, so a second evaluation of one input is the same result: it inserts
//! nothing and the first caller stays recorded.

use sqlx::PgPool;

/// One evaluation to store.
#[derive(Debug, Clone)]
pub struct NewEvaluation<'a> {
    pub input_digest: &'a str,
    pub disposition: &'a str,
    pub result: &'a [u8],
    pub context: &'a [u8],
    pub subject_id: Option<&'a str>,
    pub revision_id: Option<&'a str>,
    pub evaluated_by: &'a str,
}

/// A stored evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub result: Vec<u8>,
    pub context: Vec<u8>,
    pub evaluated_by: String,
    pub stored_at_us: i64,
    /// The context's subject id, for a stored reduction or a bound inline one.
    pub subject_id: Option<String>,
}

/// Store `e` unless its input digest is stored already (one statement; read committed).
pub async fn store(pool: &PgPool, e: &NewEvaluation<'_>) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO evaluations (input_digest, disposition, result, context, subject_id, \
                                  revision_id, evaluated_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (input_digest) DO NOTHING",
    )
    .bind(e.input_digest)
    .bind(e.disposition)
    .bind(e.result)
    .bind(e.context)
    .bind(e.subject_id)
    .bind(e.revision_id)
    .bind(e.evaluated_by)
    .execute(pool)
    .await?;
    Ok(())
}

/// `(result, context, evaluated_by, stored_at_us, subject_id)`.
type StoredRow = (Vec<u8>, Vec<u8>, String, i64, Option<String>);

/// The evaluation of `input_digest`, if stored.
pub async fn get(pool: &PgPool, input_digest: &str) -> sqlx::Result<Option<Stored>> {
    let row: Option<StoredRow> = sqlx::query_as(
        "SELECT result, context, evaluated_by, (extract(epoch FROM stored_at) * 1000000)::bigint, \
                subject_id \
         FROM evaluations WHERE input_digest = $1",
    )
    .bind(input_digest)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(
        |(result, context, evaluated_by, stored_at_us, subject_id)| Stored {
            result,
            context,
            evaluated_by,
            stored_at_us,
            subject_id,
        },
    ))
}
