{
  "format": "ongrid-pack-signature v1",
  "digest": "sha256:c66f631ddbed6cf1d5e1191ac5975f2bf69e7776fca0725bfbf25f01ffd2ecae",
  "signer": "SHA256:DR1lLNQkCV8vg9WfRltvV75Ru9wKeJfRrOIqRnTcNo4",
  "key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGaXsJEX/y/FZ7QjFKl639xuU6PgyOmfF58dW4P77lqI",
  "signature": "N2RJIoa4q99fs4B5y9qGVIiFNAHiSdZb38LQBh5BiuAjKfQiDOruianQd70KiENwUPCBOmzNQq2xFEech+NeDA=="
}
