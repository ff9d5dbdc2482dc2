// pg and the client package are loaded by Node at run time, not bundled:
// node-postgres needs Node's own modules (net, tls, crypto).
module.exports = {
  serverExternalPackages: ['pg', 'webhook-dedup'],
  poweredByHeader: false,
};
