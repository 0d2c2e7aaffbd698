package tests

import (
	"net/http"
	"strings"
)

func awsCases() []catCase {
	j := "--output=json"
	return []catCase{
		{"aws", "sts.get-caller-identity", `{}`, []string{"sts", "get-caller-identity", j}, "Action=GetCallerIdentity"},
		{"aws", "s3.ls", `{"uri": "s3://my-bucket/logs/"}`, []string{"s3", "ls", "s3://my-bucket/logs/"}, "list-type=2"},
		{"aws", "s3.cp", `{"source": "up.txt", "destination": "s3://my-bucket/up.txt", "content_type": "text/plain"}`,
			[]string{"s3", "cp", "up.txt", "s3://my-bucket/up.txt", "--content-type=text/plain", "--no-progress"}, "PUT https://my-bucket.s3.us-east-1.amazonaws.com/up.txt?  UPLOAD"},
		{"aws", "s3.cp", `{"source": "s3://my-bucket/logs/a.txt", "destination": "dl/"}`,
			[]string{"s3", "cp", "s3://my-bucket/logs/a.txt", "dl/", "--no-progress"}, "GET https://my-bucket.s3"},
		{"aws", "s3.presign", `{"uri": "s3://my-bucket/logs/a.txt", "expires_in": 600}`,
			[]string{"s3", "presign", "s3://my-bucket/logs/a.txt", "--expires-in=600"}, ""},
		{"aws", "s3api.list-objects-v2", `{"bucket": "my-bucket", "prefix": "logs/", "delimiter": "/"}`,
			[]string{"s3api", "list-objects-v2", "--bucket=my-bucket", "--prefix=logs/", "--delimiter=/", "--max-items=100", j}, "prefix=logs"},
		{"aws", "ec2.describe-instances", `{"filters": "Name=instance-state-name,Values=running"}`,
			[]string{"ec2", "describe-instances", "--filters=Name=instance-state-name,Values=running", "--max-items=100", j}, "Action=DescribeInstances"},
		{"aws", "ec2.describe-vpcs", `{"vpc_ids": ["vpc-0a1b2c3d", "vpc-0e0f0a0b"]}`,
			[]string{"ec2", "describe-vpcs", `--vpc-ids=["vpc-0a1b2c3d","vpc-0e0f0a0b"]`, "--max-items=100", j}, "VpcId.2=vpc-0e0f0a0b"},
		{"aws", "ec2.describe-subnets", `{"filters": [{"Name": "vpc-id", "Values": ["vpc-0a1b2c3d"]}]}`,
			[]string{"ec2", "describe-subnets", `--filters=[{"Name":"vpc-id","Values":["vpc-0a1b2c3d"]}]`, "--max-items=100", j}, "Filter.1.Value.1=vpc-0a1b2c3d"},
		{"aws", "ec2.describe-security-groups", `{"group_ids": ["sg-0123abcd"], "query": "SecurityGroups[].GroupId"}`,
			[]string{"ec2", "describe-security-groups", `--group-ids=["sg-0123abcd"]`, "--max-items=100", "--query=SecurityGroups[].GroupId", j}, "GroupId.1=sg-0123abcd"},
		{"aws", "logs.describe-log-groups", `{"prefix": "/aws/lambda/"}`,
			[]string{"logs", "describe-log-groups", "--log-group-name-prefix=/aws/lambda/", "--max-items=100", j}, "Logs_20140328.DescribeLogGroups"},
		{"aws", "logs.filter-log-events", `{"log_group": "/aws/lambda/checkout", "filter_pattern": "ERROR", "start_time": 1732608000000, "max_items": 10}`,
			[]string{"logs", "filter-log-events", "--log-group-name=/aws/lambda/checkout", "--filter-pattern=ERROR", "--start-time=1732608000000", "--max-items=10", j}, "Logs_20140328.FilterLogEvents"},
		{"aws", "logs.tail", `{"log_group": "/aws/lambda/checkout", "since": "1h", "format": "short"}`,
			[]string{"logs", "tail", "/aws/lambda/checkout", "--since=1h", "--format=short"}, "Logs_20140328.FilterLogEvents"},
		{"aws", "iam.list-roles", `{"path_prefix": "/service-role/"}`,
			[]string{"iam", "list-roles", "--path-prefix=/service-role/", "--max-items=100", j}, "Action=ListRoles"},
		{"aws", "iam.get-role", `{"role_name": "deploy-ci"}`,
			[]string{"iam", "get-role", "--role-name=deploy-ci", j}, "RoleName=deploy-ci"},
		{"aws", "cloudformation.describe-stacks", `{"stack_name": "prod-api", "query": "Stacks[0].Outputs"}`,
			[]string{"cloudformation", "describe-stacks", "--stack-name=prod-api", "--max-items=100", "--query=Stacks[0].Outputs", j}, "StackName=prod-api"},
		{"aws", "cloudformation.describe-stack-events", `{"stack_name": "prod-api", "max_items": 5}`,
			[]string{"cloudformation", "describe-stack-events", "--stack-name=prod-api", "--max-items=5", j}, "Action=DescribeStackEvents"},
		{"aws", "lambda.list-functions", `{}`, []string{"lambda", "list-functions", "--max-items=100", j}, "/2015-03-31/functions/"},
		{"aws", "lambda.get-function", `{"function_name": "checkout"}`,
			[]string{"lambda", "get-function", "--function-name=checkout", j}, "/2015-03-31/functions/checkout"},
		{"aws", "ecr.describe-repositories", `{"repository_names": ["web"]}`,
			[]string{"ecr", "describe-repositories", `--repository-names=["web"]`, "--max-items=100", j}, "DescribeRepositories"},
	}
}

// awsAnswer is the fake AWS: canned answers in the shapes the AWS API references document (query
// protocol XML for STS, EC2, IAM and CloudFormation; JSON for CloudWatch Logs and ECR; REST-JSON
// for Lambda; REST-XML for S3).
func awsAnswer(s seen) answer {
	xml := func(b string) answer {
		return answer{ctype: "text/xml", body: `<?xml version="1.0" encoding="UTF-8"?>` + b}
	}
	amzJSON := func(b string) answer { return answer{ctype: "application/x-amz-json-1.1", body: b} }
	action := s.Body + "&" + s.Query
	target := s.Target
	switch {
	case strings.Contains(action, "Action=GetCallerIdentity"):
		return xml(`<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:sts::123456789012:assumed-role/Admin/alice</Arn><UserId>AROAEXAMPLE:alice</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	case strings.Contains(action, "Action=DescribeInstances"):
		return xml(`<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r2</requestId><reservationSet><item><reservationId>r-0abc</reservationId><ownerId>123456789012</ownerId><instancesSet><item><instanceId>i-0123456789abcdef0</instanceId><instanceType>t3.micro</instanceType><instanceState><code>16</code><name>running</name></instanceState><privateIpAddress>10.0.1.5</privateIpAddress><launchTime>2026-11-20T10:00:00.000Z</launchTime></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`)
	case strings.Contains(action, "Action=DescribeVpcs"):
		return xml(`<DescribeVpcsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r3</requestId><vpcSet><item><vpcId>vpc-0a1b2c3d</vpcId><state>available</state><cidrBlock>10.0.0.0/16</cidrBlock><isDefault>false</isDefault></item></vpcSet></DescribeVpcsResponse>`)
	case strings.Contains(action, "Action=DescribeSubnets"):
		return xml(`<DescribeSubnetsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r4</requestId><subnetSet><item><subnetId>subnet-0a1b2c3d</subnetId><vpcId>vpc-0a1b2c3d</vpcId><cidrBlock>10.0.1.0/24</cidrBlock><availabilityZone>us-east-1a</availabilityZone><availableIpAddressCount>250</availableIpAddressCount><mapPublicIpOnLaunch>false</mapPublicIpOnLaunch></item></subnetSet></DescribeSubnetsResponse>`)
	case strings.Contains(action, "Action=DescribeSecurityGroups"):
		return xml(`<DescribeSecurityGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r5</requestId><securityGroupInfo><item><groupId>sg-0123abcd</groupId><groupName>web</groupName><vpcId>vpc-0a1b2c3d</vpcId><groupDescription>web</groupDescription><ipPermissions><item><ipProtocol>tcp</ipProtocol><fromPort>443</fromPort><toPort>443</toPort><ipRanges><item><cidrIp>0.0.0.0/0</cidrIp></item></ipRanges></item></ipPermissions><ipPermissionsEgress/></item></securityGroupInfo></DescribeSecurityGroupsResponse>`)
	case strings.Contains(action, "Action=ListRoles"):
		return xml(`<ListRolesResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><ListRolesResult><IsTruncated>false</IsTruncated><Roles><member><Path>/service-role/</Path><RoleName>deploy-ci</RoleName><RoleId>AROAEXAMPLE</RoleId><Arn>arn:aws:iam::123456789012:role/service-role/deploy-ci</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate><AssumeRolePolicyDocument>%7B%22Version%22%3A%222012-10-17%22%7D</AssumeRolePolicyDocument><MaxSessionDuration>3600</MaxSessionDuration></member></Roles></ListRolesResult><ResponseMetadata><RequestId>r6</RequestId></ResponseMetadata></ListRolesResponse>`)
	case strings.Contains(action, "Action=GetRole"):
		return xml(`<GetRoleResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><GetRoleResult><Role><Path>/</Path><RoleName>deploy-ci</RoleName><RoleId>AROAEXAMPLE</RoleId><Arn>arn:aws:iam::123456789012:role/deploy-ci</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate><AssumeRolePolicyDocument>%7B%22Version%22%3A%222012-10-17%22%7D</AssumeRolePolicyDocument><MaxSessionDuration>3600</MaxSessionDuration><RoleLastUsed><LastUsedDate>2026-11-20T10:00:00Z</LastUsedDate><Region>us-east-1</Region></RoleLastUsed></Role></GetRoleResult><ResponseMetadata><RequestId>r7</RequestId></ResponseMetadata></GetRoleResponse>`)
	case strings.Contains(action, "Action=DescribeStacks"):
		return xml(`<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStacksResult><Stacks><member><StackName>prod-api</StackName><StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/prod-api/1a2b3c4d-0000-0000-0000-000000000000</StackId><StackStatus>UPDATE_COMPLETE</StackStatus><CreationTime>2026-01-01T00:00:00Z</CreationTime><Outputs><member><OutputKey>Url</OutputKey><OutputValue>https://api.example.com</OutputValue></member></Outputs></member></Stacks></DescribeStacksResult><ResponseMetadata><RequestId>r8</RequestId></ResponseMetadata></DescribeStacksResponse>`)
	case strings.Contains(action, "Action=DescribeStackEvents"):
		return xml(`<DescribeStackEventsResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStackEventsResult><StackEvents><member><StackName>prod-api</StackName><StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/prod-api/1a2b3c4d-0000-0000-0000-000000000000</StackId><EventId>e1</EventId><LogicalResourceId>Api</LogicalResourceId><ResourceType>AWS::Lambda::Function</ResourceType><ResourceStatus>UPDATE_FAILED</ResourceStatus><ResourceStatusReason>Resource handler returned message: "Memory size too large"</ResourceStatusReason><Timestamp>2026-11-20T10:00:00Z</Timestamp></member></StackEvents></DescribeStackEventsResult><ResponseMetadata><RequestId>r9</RequestId></ResponseMetadata></DescribeStackEventsResponse>`)
	case target == "Logs_20140328.DescribeLogGroups":
		return amzJSON(`{"logGroups":[{"logGroupName":"/aws/lambda/checkout","creationTime":1732608000000,"retentionInDays":14,"storedBytes":2048,"arn":"arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/checkout:*"}]}`)
	case target == "Logs_20140328.FilterLogEvents":
		return amzJSON(`{"events":[{"logStreamName":"2026/11/20/[$LATEST]abc","timestamp":1732608001000,"message":"ERROR payment timeout","ingestionTime":1732608002000,"eventId":"1"}],"searchedLogStreams":[]}`)
	case target == "AmazonEC2ContainerRegistry_V20150921.DescribeRepositories":
		return amzJSON(`{"repositories":[{"repositoryArn":"arn:aws:ecr:us-east-1:123456789012:repository/web","registryId":"123456789012","repositoryName":"web","repositoryUri":"123456789012.dkr.ecr.us-east-1.amazonaws.com/web","createdAt":1732608000,"imageTagMutability":"IMMUTABLE"}]}`)
	case s.Host == "lambda.us-east-1.amazonaws.com" && s.Path == "/2015-03-31/functions/":
		return answer{body: `{"Functions":[{"FunctionName":"checkout","FunctionArn":"arn:aws:lambda:us-east-1:123456789012:function:checkout","Runtime":"python3.12","Handler":"app.handler","MemorySize":512,"Timeout":30,"LastModified":"2026-11-20T10:00:00.000+0000","Role":"arn:aws:iam::123456789012:role/checkout"}]}`}
	case s.Host == "lambda.us-east-1.amazonaws.com" && s.Path == "/2015-03-31/functions/checkout":
		return answer{body: `{"Configuration":{"FunctionName":"checkout","Runtime":"python3.12","MemorySize":512,"State":"Active","LastUpdateStatus":"Successful"},"Code":{"RepositoryType":"S3","Location":"https://awslambda-us-east-1-tasks.s3.us-east-1.amazonaws.com/snapshots/x"},"Tags":{"team":"payments"}}`}
	case strings.Contains(s.Host, "s3") && strings.Contains(s.Query, "list-type=2"):
		return xml(`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>my-bucket</Name><Prefix>logs/</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated><Contents><Key>logs/a.txt</Key><LastModified>2026-11-20T10:00:00.000Z</LastModified><ETag>"b1946ac92492d2347c6235b4d2611184"</ETag><Size>6</Size><StorageClass>STANDARD</StorageClass></Contents><CommonPrefixes><Prefix>logs/2026/</Prefix></CommonPrefixes></ListBucketResult>`)
	case strings.Contains(s.Host, "s3") && s.Method == http.MethodPut:
		return answer{header: map[string]string{"ETag": `"fake"`}}
	case strings.Contains(s.Host, "s3") && s.Method == http.MethodHead && strings.HasSuffix(s.Path, "logs/a.txt"):
		return answer{ctype: "text/plain", header: map[string]string{"Content-Length": "6", "ETag": `"b1946ac92492d2347c6235b4d2611184"`, "Last-Modified": "Fri, 20 Nov 2026 10:00:00 GMT"}}
	case strings.Contains(s.Host, "s3") && s.Method == http.MethodGet && strings.HasSuffix(s.Path, "logs/a.txt"):
		return answer{ctype: "text/plain", body: "hello\n", header: map[string]string{"ETag": `"b1946ac92492d2347c6235b4d2611184"`, "Last-Modified": "Fri, 20 Nov 2026 10:00:00 GMT"}}
	}
	return answer{status: http.StatusBadRequest, ctype: "text/xml", body: `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>fake: no canned answer</Message></Error><RequestId>r0</RequestId></ErrorResponse>`}
}
