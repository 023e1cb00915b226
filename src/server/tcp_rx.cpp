// Bytes the kernel has received on a TCP socket (Linux >= 4.1). Its own file because glibc's
// <netinet/tcp.h> (pulled in by httplib) has an older struct tcp_info without the counter and
// clashes with <linux/tcp.h>.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace ds4::server {

uint64_t tcp_bytes_received(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  if (len < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return 0;  // older kernel
  return info.tcpi_bytes_received;
}

}  // namespace ds4::server
