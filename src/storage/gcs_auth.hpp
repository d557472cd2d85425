// How requests to Google Cloud Storage are authorized, in the order the
// official client libraries look:
//   STORAGE_EMULATOR_HOST set            the emulator there, no credentials
//   GOOGLE_APPLICATION_CREDENTIALS       a service-account JSON key: a JWT
//                                        signed with its key (OpenSSL) is
//                                        exchanged at its token_uri for an
//                                        access token, cached until 5 minutes
//                                        before it expires
//   the GCE metadata server              (GCE_METADATA_HOST or
//                                        metadata.google.internal), asked once
//                                        per process with a 1-second timeout
//   none of these                        anonymous (public buckets)
// A2PACK_GCS_ENDPOINT sends the JSON API requests elsewhere (a private
// endpoint, a test server) with the credentials found as above.
#pragma once

#include <string>

namespace a2pack::storage {

struct GcsAuth {
  std::string endpoint;  // scheme://host[:port]
  std::string header;    // "Authorization: Bearer ..." or empty (anonymous / emulator)
  std::string source;    // for messages: "service account x@y (file)", "anonymous", ...
};

// The endpoint and a current authorization (fetching or refreshing a token
// when needed). Errors name the credentials file or token server.
GcsAuth gcs_auth();

}  // namespace a2pack::storage
