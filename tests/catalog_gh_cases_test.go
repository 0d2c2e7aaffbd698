package tests

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The gh cases: repository octo/app on the fake GitHub.
const (
	prListFields    = "number,title,state,author,headRefName,baseRefName,isDraft,labels,createdAt,updatedAt,url"
	prViewFields    = "number,title,body,state,author,baseRefName,headRefName,isDraft,mergeable,reviewDecision,statusCheckRollup,labels,assignees,files,additions,deletions,comments,createdAt,updatedAt,url"
	issueListFields = "number,title,state,author,labels,assignees,createdAt,updatedAt,url"
	issueViewFields = "number,title,body,state,author,labels,assignees,milestone,comments,createdAt,updatedAt,closedAt,url"
)

func ghCases() []catCase {
	return []catCase{
		{"gh", "auth.status", `{}`, []string{"auth", "status"}, "GET https://api.github.com/?"},
		{"gh", "pr.list", `{"repo": "octo/app", "state": "open", "limit": 5}`,
			[]string{"pr", "list", "--repo=octo/app", "--state=open", "--limit=5", "--json", prListFields}, "PullRequestList"},
		{"gh", "pr.view", `{"pr": "42", "repo": "octo/app"}`,
			[]string{"pr", "view", "42", "--repo=octo/app", "--json", prViewFields}, "PullRequestByNumber"},
		{"gh", "pr.diff", `{"pr": "42", "repo": "octo/app", "name_only": true}`,
			[]string{"pr", "diff", "42", "--repo=octo/app", "--name-only", "--color=never"}, "/repos/octo/app/pulls/42"},
		{"gh", "pr.checks", `{"pr": "42", "repo": "octo/app"}`,
			[]string{"pr", "checks", "42", "--repo=octo/app"}, "PullRequestStatusChecks"},
		{"gh", "pr.create", `{"title": "Fix", "body": "Closes #1", "repo": "octo/app", "head": "fix", "base": "main", "draft": true}`,
			[]string{"pr", "create", "--title=Fix", "--body=Closes #1", "--base=main", "--head=fix", "--repo=octo/app", "--draft"}, "PullRequestCreate"},
		{"gh", "pr.comment", `{"pr": "42", "repo": "octo/app", "body": "LGTM"}`,
			[]string{"pr", "comment", "42", "--body=LGTM", "--repo=octo/app"}, `"subjectId":"PR_42","body":"LGTM"`},
		{"gh", "pr.review", `{"pr": "42", "repo": "octo/app", "event": "request-changes", "body": "Add a test."}`,
			[]string{"pr", "review", "42", "--request-changes", "--repo=octo/app", "--body=Add a test."}, `"event":"REQUEST_CHANGES"`},
		{"gh", "pr.merge", `{"pr": "42", "repo": "octo/app", "method": "squash", "match_head_commit": "3f1c2a9"}`,
			[]string{"pr", "merge", "42", "--squash", "--repo=octo/app", "--match-head-commit=3f1c2a9"}, `"expectedHeadOid":"3f1c2a9","mergeMethod":"SQUASH"`},
		{"gh", "pr.close", `{"pr": "42", "repo": "octo/app", "comment": "Superseded."}`,
			[]string{"pr", "close", "42", "--repo=octo/app", "--comment=Superseded."}, "PullRequestClose"},
		{"gh", "issue.list", `{"repo": "octo/app", "label": "bug", "limit": 3}`,
			[]string{"issue", "list", "--repo=octo/app", "--limit=3", "--label=bug", "--json", issueListFields}, "IssueSearch"},
		{"gh", "issue.view", `{"issue": "7", "repo": "octo/app"}`,
			[]string{"issue", "view", "7", "--repo=octo/app", "--json", issueViewFields}, "IssueByNumber"},
		{"gh", "issue.create", `{"title": "Crash", "body": "Steps", "repo": "octo/app"}`,
			[]string{"issue", "create", "--title=Crash", "--body=Steps", "--repo=octo/app"}, "IssueCreate"},
		{"gh", "issue.comment", `{"issue": "7", "repo": "octo/app", "body": "Fixed in #42."}`,
			[]string{"issue", "comment", "7", "--body=Fixed in #42.", "--repo=octo/app"}, `"subjectId":"I_7"`},
		{"gh", "issue.close", `{"issue": "7", "repo": "octo/app", "reason": "not planned"}`,
			[]string{"issue", "close", "7", "--repo=octo/app", "--reason=not planned"}, `"stateReason":"NOT_PLANNED"`},
		{"gh", "run.list", `{"repo": "octo/app", "branch": "main", "limit": 2}`,
			[]string{"run", "list", "--repo=octo/app", "--branch=main", "--limit=2", "--json", "databaseId,number,workflowName,displayTitle,headBranch,headSha,event,status,conclusion,createdAt,updatedAt,url"}, "/repos/octo/app/actions/runs"},
		{"gh", "run.view", `{"run_id": "1001", "repo": "octo/app", "log_failed": true}`,
			[]string{"run", "view", "1001", "--repo=octo/app", "--log-failed"}, "/repos/octo/app/actions/runs/1001/logs"},
		{"gh", "workflow.list", `{"repo": "octo/app"}`,
			[]string{"workflow", "list", "--repo=octo/app", "--limit=50"}, "/repos/octo/app/actions/workflows"},
		{"gh", "workflow.view", `{"workflow": "ci.yml", "repo": "octo/app", "yaml": true}`,
			[]string{"workflow", "view", "ci.yml", "--repo=octo/app", "--yaml"}, "/repos/octo/app/contents/.github/workflows/ci.yml"},
		{"gh", "workflow.run", `{"workflow": "deploy.yml", "repo": "octo/app", "ref": "main", "fields": {"env": "staging"}}`,
			[]string{"workflow", "run", "deploy.yml", "--repo=octo/app", "--ref=main", "--raw-field=env=staging"}, `/repos/octo/app/actions/workflows/55/dispatches?  {"inputs":{"env":"staging"},"ref":"main"}`},
		{"gh", "release.list", `{"repo": "octo/app", "limit": 2}`,
			[]string{"release", "list", "--repo=octo/app", "--limit=2"}, "RepositoryReleaseList"},
		{"gh", "release.view", `{"repo": "octo/app", "tag": "v1.2.0"}`,
			[]string{"release", "view", "v1.2.0", "--repo=octo/app", "--json", "tagName,name,body,isDraft,isPrerelease,author,createdAt,publishedAt,targetCommitish,url,assets"}, "/repos/octo/app/releases/tags/v1.2.0"},
		{"gh", "release.create", `{"tag": "v1.3.0", "repo": "octo/app", "draft": true, "notes": "Fixes."}`,
			[]string{"release", "create", "v1.3.0", "--repo=octo/app", "--notes=Fixes.", "--draft", "--"}, `"tag_name":"v1.3.0"`},
		{"gh", "repo.view", `{"repo": "octo/app"}`,
			[]string{"repo", "view", "octo/app", "--json", "nameWithOwner,description,url,homepageUrl,defaultBranchRef,isPrivate,isArchived,isFork,stargazerCount,forkCount,primaryLanguage,licenseInfo,repositoryTopics,pushedAt"}, "RepositoryInfo"},
		{"gh", "repo.list", `{"owner": "octo", "limit": 2, "source": true}`,
			[]string{"repo", "list", "octo", "--limit=2", "--source", "--json", "nameWithOwner,description,isFork,isArchived,isPrivate,primaryLanguage,stargazerCount,defaultBranchRef,pushedAt,url"}, "RepositoryList"},
		{"gh", "search.repos", `{"query": ["cli", "stars:>100"], "language": "go", "limit": 2}`,
			[]string{"search", "repos", "--language=go", "--limit=2", "--json", "fullName,description,url,stargazersCount,forksCount,language,license,visibility,isArchived,isFork,pushedAt,updatedAt", "--", "cli", "stars:>100"}, "/search/repositories"},
		{"gh", "search.issues", `{"query": ["crash", "-label:wontfix"], "repo": ["octo/app"], "state": "open", "limit": 2}`,
			[]string{"search", "issues", "--repo=octo/app", "--state=open", "--limit=2", "--json", "number,title,state,author,labels,repository,commentsCount,createdAt,updatedAt,closedAt,url", "--", "crash", "-label:wontfix"}, "/search/issues"},
		{"gh", "search.prs", `{"query": ["review-requested:@me"], "owner": "octo"}`,
			[]string{"search", "prs", "--owner=octo", "--limit=30", "--json", "number,title,state,isDraft,author,labels,repository,commentsCount,createdAt,updatedAt,closedAt,url", "--", "review-requested:@me"}, "/search/issues"},
		{"gh", "search.commits", `{"query": ["fix"], "repo": ["octo/app"], "limit": 1}`,
			[]string{"search", "commits", "--repo=octo/app", "--limit=1", "--json", "sha,commit,author,committer,repository,url", "--", "fix"}, "/search/commits"},
		{"gh", "label.list", `{"repo": "octo/app"}`,
			[]string{"label", "list", "--repo=octo/app", "--limit=100", "--json", "name,description,color,isDefault"}, "LabelList"},
		{"gh", "gist.list", `{"secret": true, "limit": 5}`,
			[]string{"gist", "list", "--secret", "--limit=5"}, "GistList"},
		{"gh", "gist.view", `{"gist": "5b0e0062eb8e9654adad7bb1d81cc75f", "filename": "notes.md"}`,
			[]string{"gist", "view", "5b0e0062eb8e9654adad7bb1d81cc75f", "--raw", "--filename=notes.md"}, "/gists/5b0e0062eb8e9654adad7bb1d81cc75f"},
		{"gh", "api", `{"endpoint": "repos/octo/app/commits/main/status", "fields": {"per_page": "5"}}`,
			[]string{"api", "--method=GET", "repos/octo/app/commits/main/status", "--raw-field=per_page=5"}, "/repos/octo/app/commits/main/status?per_page=5"},
	}
}

// githubAnswer is the fake GitHub: canned answers in the shapes of GitHub's REST and GraphQL
// APIs (docs.github.com), for the requests gh 2.23 makes.
func githubAnswer(s seen) answer {
	if s.Path == "/graphql" {
		return graphqlAnswer(s.Body)
	}
	user := `{"login":"octocat","id":1,"type":"User"}`
	switch {
	case s.Path == "/" && s.Method == http.MethodGet: // gh auth status reads the token's scopes here
		return answer{body: `{"current_user_url":"https://api.github.com/user"}`, header: map[string]string{"X-Oauth-Scopes": "repo, read:org, workflow, gist"}}
	case s.Path == "/repos/octo/app/pulls/42":
		return answer{ctype: "text/plain", body: "diff --git a/cmd/main.go b/cmd/main.go\nindex 1111111..2222222 100644\n--- a/cmd/main.go\n+++ b/cmd/main.go\n@@ -1,3 +1,3 @@\n package main\n-func main() {}\n+func main() { run() }\n"}
	case s.Path == "/repos/octo/app/actions/runs":
		return answer{body: `{"total_count":1,"workflow_runs":[{"id":1001,"run_number":17,"name":"CI","display_title":"Fix crash","head_branch":"main","head_sha":"3f1c2a9d","event":"push","status":"completed","conclusion":"failure","workflow_id":55,"created_at":"2026-11-20T10:00:00Z","updated_at":"2026-11-20T10:05:00Z","html_url":"https://github.com/octo/app/actions/runs/1001"}]}`}
	case s.Path == "/repos/octo/app/actions/workflows":
		return answer{body: `{"total_count":1,"workflows":[{"id":55,"name":"CI","path":".github/workflows/ci.yml","state":"active"}]}`}
	case s.Path == "/repos/octo/app/actions/runs/1001":
		return answer{body: `{"id":1001,"run_number":17,"name":"CI","display_title":"Fix crash","head_branch":"main","head_sha":"3f1c2a9d","event":"push","status":"completed","conclusion":"failure","workflow_id":55,"jobs_url":"https://api.github.com/repos/octo/app/actions/runs/1001/jobs","logs_url":"https://api.github.com/repos/octo/app/actions/runs/1001/logs","created_at":"2026-11-20T10:00:00Z","updated_at":"2026-11-20T10:05:00Z","html_url":"https://github.com/octo/app/actions/runs/1001"}`}
	case s.Path == "/repos/octo/app/actions/runs/1001/jobs":
		return answer{body: `{"total_count":1,"jobs":[{"id":501,"run_id":1001,"name":"build","status":"completed","conclusion":"failure","started_at":"2026-11-20T10:00:00Z","completed_at":"2026-11-20T10:02:00Z","html_url":"https://github.com/octo/app/actions/runs/1001/job/501","steps":[{"name":"Set up job","status":"completed","conclusion":"success","number":1},{"name":"Run tests","status":"completed","conclusion":"failure","number":2}]}]}`}
	case s.Path == "/repos/octo/app/actions/runs/1001/logs":
		return answer{ctype: "application/zip", body: runLogZip()}
	case strings.HasPrefix(s.Path, "/repos/octo/app/check-runs/501/annotations"):
		return answer{body: `[]`}
	case s.Path == "/repos/octo/app/actions/workflows/ci.yml", s.Path == "/repos/octo/app/actions/workflows/deploy.yml":
		return answer{body: `{"id":55,"name":"CI","path":".github/workflows/ci.yml","state":"active"}`}
	case strings.HasPrefix(s.Path, "/repos/octo/app/contents/.github/workflows/ci.yml"):
		yaml := base64.StdEncoding.EncodeToString([]byte("name: CI\non:\n  workflow_dispatch:\n    inputs:\n      env: {type: string}\njobs: {}\n"))
		return answer{body: `{"name":"ci.yml","path":".github/workflows/ci.yml","encoding":"base64","content":"` + yaml + `"}`}
	case s.Path == "/repos/octo/app/actions/workflows/55/dispatches":
		return answer{status: http.StatusNoContent}
	case s.Path == "/repos/octo/app/releases" && s.Method == http.MethodPost:
		return answer{status: http.StatusCreated, body: `{"id":10,"tag_name":"v1.3.0","draft":true,"html_url":"https://github.com/octo/app/releases/tag/untagged-1","upload_url":"https://uploads.github.com/repos/octo/app/releases/10/assets{?name,label}"}`}
	case s.Path == "/repos/octo/app/actions/workflows/55":
		return answer{body: `{"id":55,"name":"CI","path":".github/workflows/ci.yml","state":"active"}`}
	case s.Path == "/repos/octo/app/releases/tags/v1.2.0":
		return answer{body: `{"id":9,"tag_name":"v1.2.0","name":"v1.2.0","body":"Fixes.","draft":false,"prerelease":false,"author":` + user + `,"created_at":"2026-11-01T00:00:00Z","published_at":"2026-11-01T00:00:00Z","target_commitish":"main","html_url":"https://github.com/octo/app/releases/tag/v1.2.0","url":"https://api.github.com/repos/octo/app/releases/9","assets":[{"name":"app.tar.gz","size":1024,"download_count":3,"browser_download_url":"https://github.com/octo/app/releases/download/v1.2.0/app.tar.gz"}]}`}
	case s.Path == "/search/repositories":
		return answer{body: `{"total_count":1,"incomplete_results":false,"items":[{"id":1,"name":"app","full_name":"octo/app","owner":` + user + `,"description":"An app","html_url":"https://github.com/octo/app","stargazers_count":120,"forks_count":4,"language":"Go","visibility":"public","archived":false,"fork":false,"pushed_at":"2026-11-20T10:00:00Z","updated_at":"2026-11-20T10:00:00Z"}]}`}
	case s.Path == "/search/issues":
		return answer{body: `{"total_count":1,"incomplete_results":false,"items":[{"id":7,"number":7,"title":"Crash on start","state":"open","user":` + user + `,"labels":[],"comments":2,"created_at":"2026-11-19T10:00:00Z","updated_at":"2026-11-19T11:00:00Z","html_url":"https://github.com/octo/app/issues/7","repository_url":"https://api.github.com/repos/octo/app"}]}`}
	case s.Path == "/search/commits":
		return answer{body: `{"total_count":1,"incomplete_results":false,"items":[{"sha":"3f1c2a9d","html_url":"https://github.com/octo/app/commit/3f1c2a9d","commit":{"message":"fix: crash","author":{"name":"Octo Cat","email":"o@example.com","date":"2026-11-20T10:00:00Z"}},"author":` + user + `,"repository":{"id":1,"name":"app","full_name":"octo/app","owner":` + user + `}}]}`}
	case s.Path == "/gists/5b0e0062eb8e9654adad7bb1d81cc75f":
		return answer{body: `{"id":"5b0e0062eb8e9654adad7bb1d81cc75f","description":"notes","public":false,"owner":` + user + `,"files":{"notes.md":{"filename":"notes.md","type":"text/markdown","content":"# Notes\n"}}}`}
	case s.Path == "/repos/octo/app/commits/main/status":
		return answer{body: `{"state":"success","sha":"3f1c2a9d","total_count":1,"statuses":[{"state":"success","context":"ci"}]}`}
	}
	return answer{status: http.StatusNotFound, body: `{"message":"fake: no canned answer","documentation_url":"https://docs.github.com/rest"}`}
}

// graphqlAnswer answers gh's GraphQL queries by operation name.
func graphqlAnswer(body string) answer {
	author := `{"login":"octocat","id":"U_1","name":"Octo Cat","is_bot":false}`
	labels := `{"nodes":[{"id":"L_1","name":"bug","description":"","color":"d73a4a"}],"totalCount":1}`
	switch {
	case strings.Contains(body, "UserCurrent"), strings.Contains(body, "viewer{login}"):
		return answer{body: `{"data":{"viewer":{"login":"octocat"}}}`}
	case strings.Contains(body, "PullRequestList"):
		return answer{body: `{"data":{"repository":{"pullRequests":{"totalCount":1,"nodes":[{"number":42,"title":"Fix crash","state":"OPEN","url":"https://github.com/octo/app/pull/42","headRefName":"fix","baseRefName":"main","isDraft":false,"createdAt":"2026-11-20T10:00:00Z","updatedAt":"2026-11-20T11:00:00Z","author":` + author + `,"labels":` + labels + `}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "PullRequestByNumber"):
		return answer{body: `{"data":{"repository":{"pullRequest":{"id":"PR_42","number":42,"title":"Fix crash","body":"Closes #7","state":"OPEN","url":"https://github.com/octo/app/pull/42","headRefName":"fix","baseRefName":"main","isDraft":false,"mergeable":"MERGEABLE","reviewDecision":"APPROVED","additions":3,"deletions":1,"createdAt":"2026-11-20T10:00:00Z","updatedAt":"2026-11-20T11:00:00Z","author":` + author + `,"labels":` + labels + `,"assignees":{"nodes":[],"totalCount":0},"files":{"nodes":[{"path":"cmd/main.go","additions":3,"deletions":1}]},"comments":{"nodes":[],"totalCount":0,"pageInfo":{"hasNextPage":false,"endCursor":""}},"statusCheckRollup":{"nodes":[{"commit":{"oid":"3f1c2a9d","statusCheckRollup":{"contexts":{"nodes":[{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"FAILURE","startedAt":"2026-11-20T10:00:00Z","completedAt":"2026-11-20T10:02:00Z","detailsUrl":"https://github.com/octo/app/actions/runs/1001"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}]},"commits":{"nodes":[{"commit":{"oid":"3f1c2a9d","statusCheckRollup":{"contexts":{"nodes":[{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"FAILURE","startedAt":"2026-11-20T10:00:00Z","completedAt":"2026-11-20T10:02:00Z","detailsUrl":"https://github.com/octo/app/actions/runs/1001"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}]}}}}}`}
	case strings.Contains(body, "IssueList"):
		return answer{body: `{"data":{"repository":{"hasIssuesEnabled":true,"issues":{"totalCount":1,"nodes":[{"number":7,"title":"Crash on start","state":"OPEN","url":"https://github.com/octo/app/issues/7","createdAt":"2026-11-19T10:00:00Z","updatedAt":"2026-11-19T11:00:00Z","author":` + author + `,"labels":` + labels + `,"assignees":{"nodes":[],"totalCount":0}}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "IssueSearch"):
		return answer{body: `{"data":{"repository":{"hasIssuesEnabled":true},"search":{"issueCount":1,"nodes":[{"number":7,"title":"Crash on start","state":"OPEN","url":"https://github.com/octo/app/issues/7","createdAt":"2026-11-19T10:00:00Z","updatedAt":"2026-11-19T11:00:00Z","author":` + author + `,"labels":` + labels + `,"assignees":{"nodes":[],"totalCount":0}}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}`}
	case strings.Contains(body, "CommentsForIssue"), strings.Contains(body, "CommentsForPullRequest"):
		return answer{body: `{"data":{"node":{"comments":{"nodes":[],"totalCount":0,"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "RepositoryReleaseByTag"):
		return answer{body: `{"data":{"repository":{"release":{"databaseId":9,"isDraft":false}}}}`}
	case strings.Contains(body, "__type(name:"): // gh asks which fields this GitHub's schema has
		return answer{body: `{"data":{"PullRequest":{"fields":[{"name":"id"},{"name":"number"},{"name":"title"},{"name":"state"},{"name":"mergeStateStatus"}]}}}`}
	case strings.Contains(body, "PullRequestStatusChecks"):
		return answer{body: `{"data":{"node":{"statusCheckRollup":{"nodes":[{"commit":{"statusCheckRollup":{"contexts":{"nodes":[{"__typename":"CheckRun","name":"build","status":"COMPLETED","conclusion":"SUCCESS","startedAt":"2026-11-20T10:00:00Z","completedAt":"2026-11-20T10:02:00Z","detailsUrl":"https://github.com/octo/app/actions/runs/1001"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}]}}}}`}
	case strings.Contains(body, "PullRequestForBranch"):
		return answer{body: `{"data":{"repository":{"pullRequests":{"nodes":[]}}}}`}
	case strings.Contains(body, "mutation PullRequestCreate"):
		return answer{body: `{"data":{"createPullRequest":{"pullRequest":{"id":"PR_43","url":"https://github.com/octo/app/pull/43"}}}}`}
	case strings.Contains(body, "mutation IssueCreate"):
		return answer{body: `{"data":{"createIssue":{"issue":{"id":"I_8","url":"https://github.com/octo/app/issues/8"}}}}`}
	case strings.Contains(body, "mutation CommentCreate"):
		return answer{body: `{"data":{"addComment":{"commentEdge":{"node":{"url":"https://github.com/octo/app/pull/42#issuecomment-1"}}}}}`}
	case strings.Contains(body, "mutation PullRequestReviewAdd"):
		return answer{body: `{"data":{"addPullRequestReview":{"clientMutationId":""}}}`}
	case strings.Contains(body, "mutation PullRequestMerge"):
		return answer{body: `{"data":{"mergePullRequest":{"clientMutationId":""}}}`}
	case strings.Contains(body, "mutation PullRequestClose"):
		return answer{body: `{"data":{"closePullRequest":{"pullRequest":{"id":"PR_42"}}}}`}
	case strings.Contains(body, "mutation IssueClose"):
		return answer{body: `{"data":{"closeIssue":{"issue":{"id":"I_7"}}}}`}
	case strings.Contains(body, "RepositoryReleaseList"):
		return answer{body: `{"data":{"repository":{"releases":{"nodes":[{"name":"v1.2.0","tagName":"v1.2.0","isDraft":false,"isLatest":true,"isPrerelease":false,"createdAt":"2026-11-01T00:00:00Z","publishedAt":"2026-11-01T00:00:00Z"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "RepositoryList"):
		return answer{body: `{"data":{"repositoryOwner":{"login":"octo","repositories":{"totalCount":1,"nodes":[{"nameWithOwner":"octo/app","description":"An app","isFork":false,"isArchived":false,"isPrivate":false,"primaryLanguage":{"name":"Go"},"stargazerCount":120,"defaultBranchRef":{"name":"main"},"pushedAt":"2026-11-20T10:00:00Z","url":"https://github.com/octo/app"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "LabelList"):
		return answer{body: `{"data":{"repository":{"labels":{"totalCount":1,"nodes":[{"name":"bug","description":"Something is broken","color":"d73a4a","isDefault":true}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "GistList"):
		return answer{body: `{"data":{"viewer":{"gists":{"nodes":[{"description":"notes","files":[{"name":"notes.md"}],"isPublic":false,"name":"5b0e0062eb8e9654adad7bb1d81cc75f","updatedAt":"2026-11-20T10:00:00Z"}],"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}`}
	case strings.Contains(body, "IssueByNumber"):
		return answer{body: `{"data":{"repository":{"hasIssuesEnabled":true,"issue":{"id":"I_7","number":7,"title":"Crash on start","body":"Steps: run it.","state":"OPEN","url":"https://github.com/octo/app/issues/7","createdAt":"2026-11-19T10:00:00Z","updatedAt":"2026-11-19T11:00:00Z","closedAt":null,"author":` + author + `,"labels":` + labels + `,"assignees":{"nodes":[],"totalCount":0},"milestone":null,"comments":{"nodes":[],"totalCount":0,"pageInfo":{"hasNextPage":false,"endCursor":""}}}}}}`}
	case strings.Contains(body, "RepositoryInfo"):
		return answer{body: `{"data":{"repository":{"id":"R_1","name":"app","owner":{"login":"octo"},"hasIssuesEnabled":true,"viewerPermission":"WRITE","nameWithOwner":"octo/app","description":"An app","url":"https://github.com/octo/app","homepageUrl":"","defaultBranchRef":{"name":"main"},"isPrivate":false,"isArchived":false,"isFork":false,"stargazerCount":120,"forkCount":4,"primaryLanguage":{"name":"Go"},"licenseInfo":{"key":"mit","name":"MIT License","nickname":""},"repositoryTopics":{"nodes":[]},"pushedAt":"2026-11-20T10:00:00Z"}}}`}
	}
	msg, _ := json.Marshal(fmt.Sprintf("fake: no canned answer for %.80s", body))
	return answer{body: `{"errors":[{"message":` + string(msg) + `}]}`}
}

// runLogZip is a run's log archive as GitHub serves it: one file per job step, JOB/N_STEP.txt.
func runLogZip() string {
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, text := range map[string]string{
		"build/1_Set up job.txt": "2026-11-20T10:00:01.0000000Z Runner ready\n",
		"build/2_Run tests.txt":  "2026-11-20T10:01:00.0000000Z --- FAIL: TestCrash\n2026-11-20T10:01:01.0000000Z exit status 1\n",
	} {
		w, _ := z.Create(name)
		_, _ = io.WriteString(w, text)
	}
	_ = z.Close()
	return b.String()
}
