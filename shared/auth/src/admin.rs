//! Provisioning identities through Ward's API, as an operator: enroll principals, issue
//! credentials, assign. Used by `lychd dev` and the test kit to give each office its service
//! principal and credential. Idempotent where provisioning is repeated on a persisted stack.

use lychd_proto::common::v1::PageRequest;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{
    AssignRequest, AuditEvent, CredentialKind, EnrollPrincipalRequest, ExchangeCredentialRequest,
    IssueCredentialRequest, ListAssignmentsRequest, ListAuditRequest, ListPrincipalsRequest,
    PrincipalKind,
};
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds a fixed bearer to every call.
#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl Bearer {
    pub fn new(token: &str) -> Result<Self, Status> {
        let mut value: tonic::metadata::MetadataValue<_> = format!("Bearer {token}")
            .parse()
            .map_err(|_| Status::invalid_argument("token is not a header value"))?;
        value.set_sensitive(true);
        Ok(Bearer(value))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// A session obtained from a credential.
pub struct Session {
    pub token: String,
    pub principal_id: String,
}

/// Exchange `credential` for a session of (at most) `ttl_seconds` (0: Ward's default), bound to
/// the offices `audiences` (the only offices it may be presented to).
pub async fn exchange(
    channel: Channel,
    credential: &str,
    ttl_seconds: u32,
    audiences: &[&str],
) -> Result<Session, Status> {
    let mut client = WardClient::with_interceptor(channel, Bearer::new(credential)?);
    let answer = client
        .exchange_credential(ExchangeCredentialRequest {
            ttl_seconds,
            audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
        })
        .await?
        .into_inner();
    Ok(Session {
        token: answer.session_token,
        principal_id: answer.principal.map(|p| p.id).unwrap_or_default(),
    })
}

/// Ward's administration API with an operator session.
#[derive(Clone)]
pub struct WardAdmin {
    client: WardClient<InterceptedService<Channel, Bearer>>,
}

impl WardAdmin {
    pub fn new(channel: Channel, session_token: &str) -> Result<Self, Status> {
        Ok(WardAdmin {
            client: WardClient::with_interceptor(channel, Bearer::new(session_token)?),
        })
    }

    /// The principal named `name`, enrolled if it does not exist yet. Returns its id.
    pub async fn ensure_principal(
        &mut self,
        kind: PrincipalKind,
        name: &str,
    ) -> Result<String, Status> {
        if let Some(id) = self.find_principal(name).await? {
            return Ok(id);
        }
        let answer = self
            .client
            .enroll_principal(EnrollPrincipalRequest {
                kind: kind as i32,
                name: name.to_owned(),
                display_name: name.to_owned(),
            })
            .await?
            .into_inner();
        answer
            .principal
            .map(|p| p.id)
            .ok_or_else(|| Status::internal("enrollment returned no principal"))
    }

    async fn find_principal(&mut self, name: &str) -> Result<Option<String>, Status> {
        let mut token = String::new();
        loop {
            let page = self
                .client
                .list_principals(ListPrincipalsRequest {
                    page: Some(PageRequest {
                        page_size: 200,
                        page_token: token,
                    }),
                })
                .await?
                .into_inner();
            if let Some(p) = page.principals.into_iter().find(|p| p.name == name) {
                return Ok(Some(p.id));
            }
            token = page.page.map(|p| p.next_page_token).unwrap_or_default();
            if token.is_empty() {
                return Ok(None);
            }
        }
    }

    /// A new standing credential for `principal_id` (the secret, shown once).
    pub async fn issue_standing(&mut self, principal_id: &str) -> Result<String, Status> {
        let answer = self
            .client
            .issue_credential(IssueCredentialRequest {
                principal_id: principal_id.to_owned(),
                kind: CredentialKind::Standing as i32,
                ttl_seconds: 0,
            })
            .await?
            .into_inner();
        Ok(answer.credential)
    }

    /// Assign unless the same live assignment exists already.
    pub async fn ensure_assignment(
        &mut self,
        principal_id: &str,
        action: &str,
        object: &str,
        audience: &str,
        purpose: &str,
    ) -> Result<(), Status> {
        let mut token = String::new();
        loop {
            let page = self
                .client
                .list_assignments(ListAssignmentsRequest {
                    principal_id: principal_id.to_owned(),
                    page: Some(PageRequest {
                        page_size: 200,
                        page_token: token,
                    }),
                })
                .await?
                .into_inner();
            if page.assignments.iter().any(|a| {
                a.action == action
                    && a.object == object
                    && a.audience == audience
                    && a.purpose == purpose
            }) {
                return Ok(());
            }
            token = page.page.map(|p| p.next_page_token).unwrap_or_default();
            if token.is_empty() {
                break;
            }
        }
        self.client
            .assign(AssignRequest {
                principal_id: principal_id.to_owned(),
                action: action.to_owned(),
                object: object.to_owned(),
                audience: audience.to_owned(),
                purpose: purpose.to_owned(),
                expires_at: None,
            })
            .await?;
        Ok(())
    }

    /// Let `principal_id` call `Describe` on `office` (`<office>:describe` on `office:<office>`).
    pub async fn allow_describe(&mut self, principal_id: &str, office: &str) -> Result<(), Status> {
        self.ensure_assignment(
            principal_id,
            &format!("{office}:describe"),
            &format!("office:{office}"),
            office,
            "describe",
        )
        .await
    }

    /// Ward's audit trail, newest first (one page of up to `page_size`). Listing it writes
    /// every decision and refusal count Ward holds first.
    pub async fn audit(&mut self, page_size: u32) -> Result<Vec<AuditEvent>, Status> {
        Ok(self
            .client
            .list_audit(ListAuditRequest {
                page: Some(PageRequest {
                    page_size,
                    page_token: String::new(),
                }),
            })
            .await?
            .into_inner()
            .events)
    }

    /// The service principal of an office: enrolled if needed, allowed to ask Ward for
    /// decisions about tokens presented to itself (`ward:decide` on `decision:<office>`).
    /// Returns its id.
    pub async fn ensure_office_principal(&mut self, office: &str) -> Result<String, Status> {
        let id = self
            .ensure_principal(PrincipalKind::Service, office)
            .await?;
        let object = format!("decision:{office}");
        self.ensure_assignment(&id, "ward:decide", &object, "ward", "decide")
            .await?;
        Ok(id)
    }
}
