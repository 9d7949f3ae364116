// Command provisioner is the test bed's dynamic provisioner for its default StorageClass.
//
// The claim/volume protocol (watching claims, binding, retries, reclaim) is the
// sig-storage-lib-external-provisioner controller's; this file only says where a volume lives:
// a directory under -base-dir on the single node, exposed as a `local` PersistentVolume pinned to
// that node. A volume outlives its pod and stays while its claim stays; with reclaimPolicy Delete
// the directory goes when the claim is deleted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

type localDirProvisioner struct {
	baseDir string
	node    string
}

func (p *localDirProvisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if opts.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claim selectors are not supported")
	}
	dir := filepath.Join(p.baseDir, opts.PVName)
	// World-writable like a fresh disk as seen by a pod's fsGroup: pods run as non-root users.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningInBackground, err
	}
	node := p.node
	if opts.SelectedNode != nil {
		node = opts.SelectedNode.Name
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        opts.PVName,
			Annotations: map[string]string{"kopfka.io/testbed-dir": dir},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   opts.PVC.Spec.AccessModes,
			VolumeMode:                    opts.PVC.Spec.VolumeMode,
			MountOptions:                  opts.StorageClass.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: opts.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				Local: &v1.LocalVolumeSource{Path: dir},
			},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{node},
				}}}},
			}},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p *localDirProvisioner) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return fmt.Errorf("volume %s is not a local volume of this provisioner", pv.Name)
	}
	dir := filepath.Clean(pv.Spec.Local.Path)
	if filepath.Dir(dir) != filepath.Clean(p.baseDir) {
		return fmt.Errorf("refusing to delete %s: outside %s", dir, p.baseDir)
	}
	return os.RemoveAll(dir)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig")
	name := flag.String("name", "kopfka.io/local-dir", "provisioner name (the StorageClass's provisioner)")
	baseDir := flag.String("base-dir", "/var/lib/kopfka-testbed/volumes", "where volume directories are created")
	node := flag.String("node", "localhost", "node the volumes are pinned to when the claim names none")
	klog.InitFlags(nil)
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	if err := os.MkdirAll(*baseDir, 0o755); err != nil {
		klog.Fatalf("base dir: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pc := controller.NewProvisionController(ctx, client, *name,
		&localDirProvisioner{baseDir: *baseDir, node: *node},
		controller.LeaderElection(false))
	pc.Run(ctx)
}
