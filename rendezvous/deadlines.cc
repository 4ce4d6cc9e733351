#include "rendezvous/deadlines.h"

#include <memory>

#include <boost/asio/steady_timer.hpp>

namespace etrun::rendezvous {

void AsioDeadlines::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(executor_, delay);
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

}  // namespace etrun::rendezvous
