{
  "format": "ongrid-pack-signature v1",
  "digest": "sha256:852af6f78a5519b32eb1cb2ba67d3dde38d77ea6246b323fd840feb51f9c7fe6",
  "signer": "SHA256:DR1lLNQkCV8vg9WfRltvV75Ru9wKeJfRrOIqRnTcNo4",
  "key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGaXsJEX/y/FZ7QjFKl639xuU6PgyOmfF58dW4P77lqI",
  "signature": "CxbbnOy9PGXRVRoICAexIIyVDmmblIM+3r89xf426bDMummof1etPPHM0c4NnH67S4uJJ6Z9ZxIUoX0bm3HeAQ=="
}
