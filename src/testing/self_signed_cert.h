// WriteSelfSignedCert: a self-signed certificate for 127.0.0.1 (also as its subjectAltName) and
// its key, made with the openssl CLI as a user would make them.
//
// Test-only.
#pragma once

#include <cstdlib>
#include <string>

namespace egs::testing {

// Writes the certificate to `cert` and the key to `key`; whether openssl succeeded.
inline bool WriteSelfSignedCert(const std::string& cert, const std::string& key) {
  const std::string command =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "
      "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  return std::system(command.c_str()) == 0;
}

}  // namespace egs::testing
