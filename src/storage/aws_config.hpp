// Where S3 requests go and how they are signed, found the way the AWS CLI
// and SDKs find it:
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
//                else the profile AWS_PROFILE (default "default") of
//                AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), then of
//                AWS_CONFIG_FILE (~/.aws/config, section "profile NAME");
//                none, or AWS_NO_SIGN_REQUEST=true: anonymous (unsigned)
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's region, us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
//                endpoint_url (S3-compatible stores: path-style requests),
//                else https://s3.REGION.amazonaws.com (virtual-hosted style)
#pragma once

#include <string>

namespace a2pack::storage {

struct AwsConfig {
  std::string access_key, secret_key, session_token;
  std::string region = "us-east-1";
  std::string endpoint;   // scheme://host[:port], no trailing slash
  bool path_style = false;
  bool anonymous = false;
  std::string profile;    // the profile looked at
  std::string source;     // where the credentials came from, for messages
};

AwsConfig load_aws_config();

}  // namespace a2pack::storage
