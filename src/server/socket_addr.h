#pragma once
// A socket address as httplib prints it (numeric host, port): shared by the connection guard
// and the client watch, which both find a connection's socket by its addresses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

namespace ds4::server {

inline bool numeric_address(const sockaddr_storage& sa, std::string* host, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
    if (!inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf)) return false;
    *port = ntohs(a->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
    if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf)) return false;
    *port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  *host = buf;
  return true;
}

}  // namespace ds4::server
