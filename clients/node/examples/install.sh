# in your application's directory; WEBHOOK_DEDUP is your checkout of webhook_dedup
npm install --install-links pg@8.23.1 "$WEBHOOK_DEDUP/clients/node"
